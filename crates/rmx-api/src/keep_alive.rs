//! `keep_alive`: how long a model stays loaded after a request, as Ollama takes it: a duration
//! string ("5m", "30s", "1h30m", "250ms"), or a number of seconds; 0 unloads right after the
//! reply, a negative value keeps the model loaded until it is stopped.

use std::fmt;
use std::time::Duration;

use serde::de::{self, Visitor};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeepAlive {
    /// Unload when idle for this long (zero: at once).
    For(Duration),
    Forever,
}

impl KeepAlive {
    pub const DEFAULT: KeepAlive = KeepAlive::For(Duration::from_secs(300));

    /// Parses "5m", "30s", "1h", "250ms", "1h30m", "-1", "0", "300" (bare numbers are seconds).
    pub fn parse(text: &str) -> Result<KeepAlive, String> {
        let t = text.trim();
        if let Ok(secs) = t.parse::<f64>() {
            return Ok(Self::from_secs(secs));
        }
        if let Some(rest) = t.strip_prefix('-') {
            // "-1s", "-5m": any negative duration means forever.
            return parse_duration(rest)
                .map(|_| KeepAlive::Forever)
                .ok_or_else(|| bad(text));
        }
        parse_duration(t)
            .map(KeepAlive::For)
            .ok_or_else(|| bad(text))
    }

    pub fn from_secs(secs: f64) -> KeepAlive {
        if secs < 0.0 {
            KeepAlive::Forever
        } else {
            KeepAlive::For(Duration::from_secs_f64(secs.min(1e12)))
        }
    }

    /// Reads `RMX_KEEP_ALIVE`; unset or unreadable gives the default (5 minutes).
    pub fn from_env() -> KeepAlive {
        rmx_settings::var(rmx_settings::EnvVars::RMX_KEEP_ALIVE)
            .and_then(|v| KeepAlive::parse(&v).ok())
            .unwrap_or(KeepAlive::DEFAULT)
    }

    pub fn is_zero(self) -> bool {
        self == KeepAlive::For(Duration::ZERO)
    }
}

fn bad(text: &str) -> String {
    format!("invalid keep_alive `{text}`: expected a duration like 5m, 30s, 1h30m, or seconds")
}

/// Go-style durations: a sequence of number+unit, units h, m, s, ms.
fn parse_duration(text: &str) -> Option<Duration> {
    let mut total = 0.0f64;
    let mut rest = text;
    if rest.is_empty() {
        return None;
    }
    while !rest.is_empty() {
        let num_len = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        let value: f64 = rest[..num_len].parse().ok()?;
        rest = &rest[num_len..];
        let unit_len = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let scale = match &rest[..unit_len] {
            "h" => 3600.0,
            "m" => 60.0,
            "s" => 1.0,
            "ms" => 1e-3,
            _ => return None,
        };
        total += value * scale;
        rest = &rest[unit_len..];
    }
    Some(Duration::from_secs_f64(total))
}

impl fmt::Display for KeepAlive {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            KeepAlive::Forever => write!(f, "-1"),
            KeepAlive::For(d) if d.subsec_millis() != 0 => write!(f, "{}ms", d.as_millis()),
            KeepAlive::For(d) => write!(f, "{}s", d.as_secs()),
        }
    }
}

impl Serialize for KeepAlive {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            KeepAlive::Forever => s.serialize_i64(-1),
            other => s.serialize_str(&other.to_string()),
        }
    }
}

impl<'de> Deserialize<'de> for KeepAlive {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = KeepAlive;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a duration string like \"5m\" or a number of seconds")
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<KeepAlive, E> {
                Ok(KeepAlive::from_secs(v as f64))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<KeepAlive, E> {
                Ok(KeepAlive::from_secs(v as f64))
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<KeepAlive, E> {
                Ok(KeepAlive::from_secs(v))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<KeepAlive, E> {
                KeepAlive::parse(v).map_err(E::custom)
            }
        }
        d.deserialize_any(V)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_ollama_spellings() {
        let s = |n| KeepAlive::For(Duration::from_secs(n));
        assert_eq!(KeepAlive::parse("5m"), Ok(s(300)));
        assert_eq!(KeepAlive::parse("30s"), Ok(s(30)));
        assert_eq!(KeepAlive::parse("1h30m"), Ok(s(5400)));
        assert_eq!(KeepAlive::parse("0"), Ok(s(0)));
        assert_eq!(KeepAlive::parse("-1"), Ok(KeepAlive::Forever));
        assert_eq!(KeepAlive::parse("-5m"), Ok(KeepAlive::Forever));
        assert_eq!(
            KeepAlive::parse("250ms"),
            Ok(KeepAlive::For(Duration::from_millis(250)))
        );
        assert!(KeepAlive::parse("5 minutes").is_err());
        assert!(KeepAlive::parse("").is_err());
    }

    #[test]
    fn json_takes_strings_and_numbers() -> Result<(), serde_json::Error> {
        let k: KeepAlive = serde_json::from_str("\"2m\"")?;
        assert_eq!(k, KeepAlive::For(Duration::from_secs(120)));
        let k: KeepAlive = serde_json::from_str("0")?;
        assert!(k.is_zero());
        let k: KeepAlive = serde_json::from_str("-1")?;
        assert_eq!(k, KeepAlive::Forever);
        assert_eq!(serde_json::to_string(&KeepAlive::Forever)?, "-1");
        let back: KeepAlive = serde_json::from_str(&serde_json::to_string(&k)?)?;
        assert_eq!(back, k);
        Ok(())
    }
}
