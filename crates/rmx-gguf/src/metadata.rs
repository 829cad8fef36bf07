//! GGUF metadata values (the key/value section of the header) and typed accessors.

/// One metadata value, with GGUF's own types kept so nothing is lost in a round trip.
#[derive(Debug, Clone, PartialEq)]
pub enum MetaValue {
    U8(u8),
    I8(i8),
    U16(u16),
    I16(i16),
    U32(u32),
    I32(i32),
    F32(f32),
    Bool(bool),
    String(String),
    Array(Vec<MetaValue>),
    U64(u64),
    I64(i64),
    F64(f64),
}

impl MetaValue {
    /// Any integer type, if it is non-negative (GGUF writers disagree on u32 vs i32 for counts).
    pub fn as_u64(&self) -> Option<u64> {
        match *self {
            Self::U8(v) => Some(v.into()),
            Self::U16(v) => Some(v.into()),
            Self::U32(v) => Some(v.into()),
            Self::U64(v) => Some(v),
            Self::I8(v) => u64::try_from(v).ok(),
            Self::I16(v) => u64::try_from(v).ok(),
            Self::I32(v) => u64::try_from(v).ok(),
            Self::I64(v) => u64::try_from(v).ok(),
            _ => None,
        }
    }

    /// Any integer or float type, as f64.
    pub fn as_f64(&self) -> Option<f64> {
        match *self {
            Self::F32(v) => Some(v.into()),
            Self::F64(v) => Some(v),
            Self::I8(v) => Some(v.into()),
            Self::I16(v) => Some(v.into()),
            Self::I32(v) => Some(v.into()),
            Self::I64(v) => Some(v as f64),
            _ => self.as_u64().map(|v| v as f64),
        }
    }

    pub fn as_bool(&self) -> Option<bool> {
        match *self {
            Self::Bool(v) => Some(v),
            _ => None,
        }
    }

    pub fn as_str(&self) -> Option<&str> {
        match self {
            Self::String(s) => Some(s),
            _ => None,
        }
    }

    pub fn as_array(&self) -> Option<&[MetaValue]> {
        match self {
            Self::Array(v) => Some(v),
            _ => None,
        }
    }

    /// The value as JSON, for dumping metadata (`rmx info` and the like).
    pub fn to_json(&self) -> serde_json::Value {
        use serde_json::Value;
        match self {
            Self::Bool(v) => Value::Bool(*v),
            Self::String(s) => Value::String(s.clone()),
            Self::Array(items) => Value::Array(items.iter().map(Self::to_json).collect()),
            Self::F32(v) => {
                serde_json::Number::from_f64((*v).into()).map_or(Value::Null, Value::Number)
            }
            Self::F64(v) => serde_json::Number::from_f64(*v).map_or(Value::Null, Value::Number),
            Self::I8(v) => (*v).into(),
            Self::I16(v) => (*v).into(),
            Self::I32(v) => (*v).into(),
            Self::I64(v) => (*v).into(),
            Self::U8(v) => (*v).into(),
            Self::U16(v) => (*v).into(),
            Self::U32(v) => (*v).into(),
            Self::U64(v) => (*v).into(),
        }
    }
}
