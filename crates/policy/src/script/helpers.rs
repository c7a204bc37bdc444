//! Functions every script has besides Rhai's own, for what policy scripts do again and again:
//! adding up usage records and writing or reading a TS 29.571 `BitRate` ("12.5 Mbps"). Native,
//! so a script that uses them is shorter and faster than one that spells them out in Rhai.

use rhai::{Array, Dynamic, Engine, EvalAltResult, FLOAT, INT};

type Result<T> = std::result::Result<T, Box<EvalAltResult>>;

/// TS 29.571 BitRate units, largest first (decimal multiples, as the spec's pattern reads).
const UNITS: [(&str, f64); 5] =
    [("Tbps", 1e12), ("Gbps", 1e9), ("Mbps", 1e6), ("Kbps", 1e3), ("bps", 1.0)];

pub(super) fn register(engine: &mut Engine) {
    engine.register_fn("sum", sum);
    engine.register_fn("bitrate", |bps: INT| bitrate(bps as FLOAT));
    engine.register_fn("bitrate", bitrate);
    engine.register_fn("bps", bps);
}

/// `sum(records, "field")`: the field added up over an array of maps; a record without the
/// field counts nothing. An integer unless one of the values is a float.
fn sum(records: Array, field: &str) -> Result<Dynamic> {
    let mut int: INT = 0;
    let mut float: Option<FLOAT> = None;
    for (i, r) in records.iter().enumerate() {
        let m = r
            .read_lock::<rhai::Map>()
            .ok_or_else(|| format!("sum: record {i} is a {}, not a map", r.type_name()))?;
        let Some(v) = m.get(field) else { continue };
        if let Ok(n) = v.as_int() {
            int = int.checked_add(n).ok_or("sum: the total overflows an integer")?;
        } else if let Ok(f) = v.as_float() {
            *float.get_or_insert(0.0) += f;
        } else {
            return Err(
                format!("sum: {field} of record {i} is a {}, not a number", v.type_name()).into()
            );
        }
    }
    Ok(match float {
        Some(f) => Dynamic::from_float(f + int as FLOAT),
        None => Dynamic::from_int(int),
    })
}

/// `bitrate(12500000)` is "12.5 Mbps": bits per second as a TS 29.571 BitRate, in the largest
/// unit that keeps the number at 1 or more, with up to three decimals.
fn bitrate(bps: FLOAT) -> Result<String> {
    if !bps.is_finite() || bps < 0.0 {
        return Err(format!("bitrate: {bps} is not a bit rate").into());
    }
    let (unit, scale) = UNITS.iter().find(|(_, s)| bps >= *s).copied().unwrap_or(UNITS[4]);
    // Thousandths, written as integers: float formatting with a precision took a bignum path
    // that cost more than the rest of a script.
    let milli = (bps / scale * 1000.0).round() as u64;
    let (whole, frac) = (milli / 1000, milli % 1000);
    let mut text = whole.to_string();
    if frac != 0 {
        // "12.500" is "12.5": peers print the shortest form.
        let digits = format!("{frac:03}");
        text.push('.');
        text.push_str(digits.trim_end_matches('0'));
    }
    text.push(' ');
    text.push_str(unit);
    Ok(text)
}

/// `bps("12.5 Mbps")` is 12500000: a TS 29.571 BitRate in bits per second.
fn bps(text: &str) -> Result<INT> {
    let bad = || -> Box<EvalAltResult> {
        format!("bps: {text:?} is not a bit rate like \"100 Mbps\" (TS 29.571 BitRate)").into()
    };
    let (number, unit) = text.split_once(' ').ok_or_else(bad)?;
    let scale = UNITS.iter().find(|(u, _)| *u == unit).ok_or_else(bad)?.1;
    let well_formed = {
        let (int, frac) = number.split_once('.').unwrap_or((number, "0"));
        !int.is_empty()
            && !frac.is_empty()
            && int.bytes().all(|b| b.is_ascii_digit())
            && frac.bytes().all(|b| b.is_ascii_digit())
    };
    if !well_formed {
        return Err(bad());
    }
    let n: FLOAT = number.parse().map_err(|_| bad())?;
    let v = (n * scale).round();
    if v > INT::MAX as FLOAT {
        return Err(bad());
    }
    Ok(v as INT)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bit_rates_both_ways() {
        for (n, s) in [
            (12_500_000.0, "12.5 Mbps"),
            (25_000_000.0, "25 Mbps"),
            (999.0, "999 bps"),
            (0.0, "0 bps"),
            (1_000.0, "1 Kbps"),
            (2_345_678_901.0, "2.346 Gbps"),
            (4e12, "4 Tbps"),
        ] {
            assert_eq!(bitrate(n).unwrap(), s);
        }
        assert!(bitrate(-1.0).is_err());
        assert!(bitrate(FLOAT::NAN).is_err());
        assert_eq!(bps("12.5 Mbps").unwrap(), 12_500_000);
        assert_eq!(bps("100 Kbps").unwrap(), 100_000);
        assert_eq!(bps("7 bps").unwrap(), 7);
        for bad in
            ["12.5Mbps", "12.5 mbps", "-1 Mbps", "1. Mbps", ".5 Mbps", "1e3 bps", "", " Mbps"]
        {
            assert!(bps(bad).is_err(), "{bad} was read");
        }
    }

    #[test]
    fn sum_adds_the_field_and_refuses_what_is_not_a_number() {
        let rec = |v: Dynamic| {
            let mut m = rhai::Map::new();
            m.insert("bytes".into(), v);
            Dynamic::from_map(m)
        };
        let a: Array = vec![
            rec(Dynamic::from_int(3)),
            rec(Dynamic::from_int(4)),
            Dynamic::from_map(rhai::Map::new()),
        ];
        assert_eq!(sum(a, "bytes").unwrap().as_int().unwrap(), 7);
        let a: Array = vec![rec(Dynamic::from_int(3)), rec(Dynamic::from_float(0.5))];
        assert_eq!(sum(a, "bytes").unwrap().as_float().unwrap(), 3.5);
        assert!(sum(vec![rec(Dynamic::from("x".to_string()))], "bytes").is_err());
        assert!(sum(vec![Dynamic::from_int(1)], "bytes").is_err());
        assert!(sum(vec![rec(Dynamic::from_int(INT::MAX)), rec(Dynamic::from_int(1))], "bytes")
            .is_err());
    }
}
