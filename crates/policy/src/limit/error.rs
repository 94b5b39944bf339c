use super::FAMILY;
use crate::FieldError;

/// Checks `min <= initial <= max` and `min >= 1` for the Netflix-style configs.
pub(crate) fn check_limit_range(
    prefix: &'static [&'static str; 3],
    min: u32,
    initial: u32,
    max: u32,
) -> Result<(), FieldError> {
    let [min_field, initial_field, max_field] = *prefix;
    if min < 1 {
        return Err(FieldError::new(FAMILY, min_field, "≥ 1", min));
    }
    if max < min {
        return Err(FieldError::new(
            FAMILY,
            max_field,
            "≥ the minimum limit",
            max,
        ));
    }
    if initial < min || initial > max {
        return Err(FieldError::new(
            FAMILY,
            initial_field,
            "within [minimum, maximum] limit",
            initial,
        ));
    }
    Ok(())
}

/// Checks that a fraction lies in `[low, high]` (closed) and is not NaN.
pub(crate) fn check_closed(
    field: &'static str,
    expected: &'static str,
    value: f64,
    low: f64,
    high: f64,
) -> Result<(), FieldError> {
    if value >= low && value <= high {
        Ok(())
    } else {
        Err(FieldError::new(FAMILY, field, expected, value))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn message_names_field_expectation_and_value() {
        let e = FieldError::new(FAMILY, "aimd.backoff_ratio", "in [0.5, 1.0)", 1.2);
        assert_eq!(
            e.to_string(),
            "limit: aimd.backoff_ratio must be in [0.5, 1.0), got 1.2"
        );
        assert_eq!(e.field(), "aimd.backoff_ratio");
    }

    #[test]
    fn limit_range_rejects_each_violation() {
        const F: &[&str; 3] = &["x.min", "x.initial", "x.max"];
        assert_eq!(check_limit_range(F, 0, 1, 2).unwrap_err().field(), "x.min");
        assert_eq!(check_limit_range(F, 5, 5, 4).unwrap_err().field(), "x.max");
        assert_eq!(
            check_limit_range(F, 5, 4, 9).unwrap_err().field(),
            "x.initial"
        );
        assert_eq!(
            check_limit_range(F, 5, 10, 9).unwrap_err().field(),
            "x.initial"
        );
        assert!(check_limit_range(F, 5, 5, 5).is_ok());
    }

    #[test]
    fn closed_range_rejects_nan() {
        assert!(check_closed("f", "in [0, 1]", f64::NAN, 0.0, 1.0).is_err());
        assert!(check_closed("f", "in [0, 1]", 1.0, 0.0, 1.0).is_ok());
    }
}
