//! Did-you-mean: the closest known word to a misspelt field, kind or enum value.

/// Levenshtein distance, ASCII case-insensitive (a wrong case is a typo too).
pub fn edit_distance(a: &str, b: &str) -> usize {
    let a: Vec<char> = a.chars().map(|c| c.to_ascii_lowercase()).collect();
    let b: Vec<char> = b.chars().map(|c| c.to_ascii_lowercase()).collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    let mut cur = vec![0; b.len() + 1];
    for (i, ca) in a.iter().enumerate() {
        cur[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let sub = prev[j] + usize::from(ca != cb);
            cur[j + 1] = sub.min(prev[j + 1] + 1).min(cur[j] + 1);
        }
        std::mem::swap(&mut prev, &mut cur);
    }
    prev[b.len()]
}

/// The candidate closest to `word`, when it is close enough to be a plausible typo:
/// at most a third of the word's length away (and at least 1 edit allowed), or the
/// same word in another case or with `-`/`_` swapped.
pub fn did_you_mean<'a>(word: &str, candidates: &[&'a str]) -> Option<&'a str> {
    let norm = |s: &str| s.to_ascii_lowercase().replace(['-', '_'], "");
    let w = norm(word);
    if let Some(c) = candidates.iter().find(|c| norm(c) == w) {
        return Some(c);
    }
    let max = (word.chars().count() / 3).max(1);
    candidates
        .iter()
        .map(|c| (edit_distance(word, c), *c))
        .filter(|(d, _)| *d <= max)
        .min_by_key(|(d, _)| *d)
        .map(|(_, c)| c)
}

/// ` (did you mean `X`?)`, or nothing.
pub fn hint(word: &str, candidates: &[&str]) -> String {
    match did_you_mean(word, candidates) {
        Some(c) if c != word => format!(": did you mean `{c}`?"),
        _ => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn distance() {
        assert_eq!(edit_distance("kitten", "sitting"), 3);
        assert_eq!(edit_distance("", "abc"), 3);
        assert_eq!(edit_distance("same", "same"), 0);
        assert_eq!(edit_distance("LEND_AND_BOROW", "LEND_AND_BORROW"), 1);
    }

    #[test]
    fn suggestions() {
        let s = ["RESERVE", "LEND", "LEND_AND_BORROW"];
        assert_eq!(did_you_mean("LEND_AND_BOROW", &s), Some("LEND_AND_BORROW"));
        assert_eq!(did_you_mean("lend", &s), Some("LEND"));
        assert_eq!(did_you_mean("reserved", &s), Some("RESERVE"));
        assert_eq!(did_you_mean("SHARE", &s), None);
        assert_eq!(
            did_you_mean("maxCapcity", &["capacityUnit", "maxCapacity"]),
            Some("maxCapacity")
        );
        assert_eq!(did_you_mean("x", &["capacityUnit", "maxCapacity"]), None);
        assert_eq!(hint("LEND", &s), "");
    }
}
