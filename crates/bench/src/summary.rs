//! Summaries of repeated measurements that every bench's figures use: the median of rounds
//! and a ratio that refuses what is not one.

/// The median of `values` (the mean of the middle two for an even count); `None` if empty.
pub fn median(values: &[f64]) -> Option<f64> {
    let mut sorted: Vec<f64> = values.iter().copied().filter(|v| !v.is_nan()).collect();
    if sorted.is_empty() {
        return None;
    }
    sorted.sort_by(f64::total_cmp);
    let mid = sorted.len() / 2;
    Some(if sorted.len() % 2 == 1 {
        sorted[mid]
    } else {
        (sorted[mid - 1] + sorted[mid]) / 2.0
    })
}

/// `num ÷ den`, when both are finite and `den` is positive.
pub fn ratio(num: f64, den: f64) -> Option<f64> {
    (num.is_finite() && den.is_finite() && den > 0.0).then(|| num / den)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Catches: an even count not averaging its middle pair, an unsorted pick, NaN counted.
    #[test]
    fn median_of_odd_even_and_empty() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(&[4.0, 1.0, 3.0, 2.0]), Some(2.5));
        assert_eq!(median(&[f64::NAN, 5.0]), Some(5.0));
        assert_eq!(median(&[]), None);
    }

    /// Catches: a zero or negative denominator giving inf, NaN passing through.
    #[test]
    fn ratio_refuses_what_is_not_a_ratio() {
        assert_eq!(ratio(3.0, 2.0), Some(1.5));
        assert_eq!(ratio(1.0, 0.0), None);
        assert_eq!(ratio(f64::NAN, 1.0), None);
        assert_eq!(ratio(1.0, -2.0), None);
    }
}
