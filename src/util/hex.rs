//! Lowercase hexadecimal: ids, digests and signatures written as text.

const DIGITS: &[u8; 16] = b"0123456789abcdef";

/// Appends `bytes` to `out` as lowercase hex, two digits a byte.
pub fn push(out: &mut String, bytes: &[u8]) {
    out.reserve(bytes.len() * 2);
    for &b in bytes {
        out.push(char::from(DIGITS[usize::from(b >> 4)]));
        out.push(char::from(DIGITS[usize::from(b & 0x0f)]));
    }
}

/// Appends `v` in lowercase hex with at least `width` digits, zeros
/// before: what `format!("{v:0width$x}")` writes, without the formatter.
pub fn push_u64(out: &mut String, v: u64, width: usize) {
    let digits = (64 - v.leading_zeros() as usize)
        .div_ceil(4)
        .max(width)
        .max(1);
    out.reserve(digits);
    for k in (0..digits).rev() {
        let d = if k < 16 { (v >> (4 * k)) & 0x0f } else { 0 };
        out.push(char::from(DIGITS[d as usize]));
    }
}

/// `bytes` as lowercase hex.
pub fn encode(bytes: &[u8]) -> String {
    let mut out = String::new();
    push(&mut out, bytes);
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn every_byte_is_two_lowercase_digits() {
        let all: Vec<u8> = (0..=255).collect();
        let want: String = all.iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(super::encode(&all), want);
        let mut s = String::from("resp_");
        super::push(&mut s, &[0x0a, 0xf0]);
        assert_eq!(s, "resp_0af0");
    }

    #[test]
    fn a_number_is_written_as_the_formatter_writes_it() {
        for v in [
            0,
            1,
            0xf,
            0x10,
            0xabc,
            0xff_ffff,
            0x100_0000,
            u64::MAX >> 4,
            u64::MAX,
        ] {
            for width in [0, 1, 6, 16, 20] {
                let mut s = String::new();
                super::push_u64(&mut s, v, width);
                assert_eq!(s, format!("{v:0width$x}"), "{v} {width}");
            }
        }
    }
}
