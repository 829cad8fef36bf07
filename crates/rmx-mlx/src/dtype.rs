//! Element types. The numeric codes are shared with cpp/rmx_mlx.cc (`to_dtype`/`from_dtype`).

/// An MLX element type.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Dtype {
    Bool,
    U8,
    U16,
    U32,
    U64,
    I8,
    I16,
    I32,
    I64,
    F16,
    F32,
    Bf16,
    Complex64,
    F64,
}

impl Dtype {
    const ALL: [Dtype; 14] = [
        Dtype::Bool,
        Dtype::U8,
        Dtype::U16,
        Dtype::U32,
        Dtype::U64,
        Dtype::I8,
        Dtype::I16,
        Dtype::I32,
        Dtype::I64,
        Dtype::F16,
        Dtype::F32,
        Dtype::Bf16,
        Dtype::Complex64,
        Dtype::F64,
    ];

    pub(crate) fn code(self) -> u8 {
        Self::ALL.iter().position(|d| *d == self).unwrap_or(0) as u8
    }

    pub(crate) fn from_code(code: u8) -> Option<Dtype> {
        Self::ALL.get(code as usize).copied()
    }

    /// Bytes per element.
    pub fn size(self) -> usize {
        match self {
            Dtype::Bool | Dtype::U8 | Dtype::I8 => 1,
            Dtype::U16 | Dtype::I16 | Dtype::F16 | Dtype::Bf16 => 2,
            Dtype::U32 | Dtype::I32 | Dtype::F32 => 4,
            Dtype::U64 | Dtype::I64 | Dtype::F64 | Dtype::Complex64 => 8,
        }
    }

    pub fn is_float(self) -> bool {
        matches!(self, Dtype::F16 | Dtype::F32 | Dtype::Bf16 | Dtype::F64)
    }

    /// The name safetensors and HF configs use ("BF16", "F32", ...).
    pub fn safetensors_name(self) -> &'static str {
        match self {
            Dtype::Bool => "BOOL",
            Dtype::U8 => "U8",
            Dtype::U16 => "U16",
            Dtype::U32 => "U32",
            Dtype::U64 => "U64",
            Dtype::I8 => "I8",
            Dtype::I16 => "I16",
            Dtype::I32 => "I32",
            Dtype::I64 => "I64",
            Dtype::F16 => "F16",
            Dtype::F32 => "F32",
            Dtype::Bf16 => "BF16",
            Dtype::Complex64 => "C64",
            Dtype::F64 => "F64",
        }
    }

    /// Parses "bfloat16", "float16", "float32" as HF configs spell `torch_dtype`.
    pub fn from_torch_name(name: &str) -> Option<Dtype> {
        match name {
            "bfloat16" => Some(Dtype::Bf16),
            "float16" => Some(Dtype::F16),
            "float32" => Some(Dtype::F32),
            _ => None,
        }
    }
}

/// Host element types that can be copied into and out of arrays.
pub trait Element: Copy + Default + 'static {
    const DTYPE: Dtype;
}

macro_rules! element {
    ($t:ty, $d:expr) => {
        impl Element for $t {
            const DTYPE: Dtype = $d;
        }
    };
}
element!(bool, Dtype::Bool);
element!(u8, Dtype::U8);
element!(u16, Dtype::U16);
element!(u32, Dtype::U32);
element!(u64, Dtype::U64);
element!(i8, Dtype::I8);
element!(i16, Dtype::I16);
element!(i32, Dtype::I32);
element!(i64, Dtype::I64);
element!(half::f16, Dtype::F16);
element!(f32, Dtype::F32);
element!(half::bf16, Dtype::Bf16);
element!(f64, Dtype::F64);
