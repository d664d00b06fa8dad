//! The priced usage statement: metered units per calendar month (UTC), priced in USD.

use crate::store::Meter;

/// Price of one unit of `meter`, in thousandths of a dollar.
pub fn unit_price_millis(meter: Meter) -> i64 {
    match meter {
        Meter::Turn => 10,
        Meter::Build => 2,
        Meter::Simulation => 1,
        Meter::Commit => 20,
    }
}

/// Thousandths of a dollar as a decimal string: `30` is `0.030`.
pub fn format_millis(millis: i64) -> String {
    let sign = if millis < 0 { "-" } else { "" };
    let millis = millis.unsigned_abs();
    format!("{sign}{}.{:03}", millis / 1000, millis % 1000)
}

/// A calendar month, UTC.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Month {
    year: i64,
    /// 1 to 12.
    month: i64,
}

impl Month {
    /// Parses `YYYY-MM`.
    pub fn parse(text: &str) -> Option<Self> {
        let (year, month) = text.split_once('-')?;
        if year.len() != 4
            || month.len() != 2
            || !(year.bytes().chain(month.bytes())).all(|b| b.is_ascii_digit())
        {
            return None;
        }
        let (year, month) = (year.parse().ok()?, month.parse().ok()?);
        (1..=12).contains(&month).then_some(Self { year, month })
    }

    /// The month containing Unix second `at`.
    pub fn containing(at: i64) -> Self {
        let (year, month, _) = civil_from_days(at.div_euclid(86_400));
        Self { year, month }
    }

    /// Unix seconds of the first instant of the month, and of the next month.
    pub fn bounds(self) -> (i64, i64) {
        let next = if self.month == 12 {
            (self.year + 1, 1)
        } else {
            (self.year, self.month + 1)
        };
        (
            days_from_civil(self.year, self.month, 1) * 86_400,
            days_from_civil(next.0, next.1, 1) * 86_400,
        )
    }
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's algorithm).
fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The date of a day count since 1970-01-01 (the inverse of [`days_from_civil`]).
fn civil_from_days(days: i64) -> (i64, i64, i64) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    (yoe + era * 400 + i64::from(month <= 2), month, day)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn months_have_their_utc_bounds() {
        // 2026-11-01T00:00:00Z and 2026-12-01T00:00:00Z.
        assert_eq!(
            Month::parse("2026-11").unwrap().bounds(),
            (1_793_491_200, 1_796_083_200)
        );
        assert_eq!(
            Month::parse("2024-02").unwrap().bounds().1
                - Month::parse("2024-02").unwrap().bounds().0,
            29 * 86_400
        );
        assert_eq!(
            Month::parse("2025-12").unwrap().bounds().1,
            Month::parse("2026-01").unwrap().bounds().0
        );
        assert_eq!(
            Month::containing(1_795_000_000),
            Month::parse("2026-11").unwrap()
        );
        assert_eq!(
            Month::containing(1_796_083_199),
            Month::parse("2026-11").unwrap()
        );
        assert_eq!(
            Month::containing(1_796_083_200),
            Month::parse("2026-12").unwrap()
        );
    }

    #[test]
    fn malformed_months_are_refused() {
        for text in [
            "2026-13", "2026-00", "26-11", "2026-1", "2026/11", "abcd-ef", "",
        ] {
            assert_eq!(Month::parse(text), None, "{text}");
        }
    }

    #[test]
    fn money_has_three_decimals() {
        assert_eq!(format_millis(30), "0.030");
        assert_eq!(format_millis(12_345), "12.345");
        assert_eq!(format_millis(-5), "-0.005");
    }
}
