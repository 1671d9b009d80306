//! The token counter against the reference (tiktoken's o200k `encode_ordinary`):
//! exact counts on a varied corpus (this repository's prose, code and JSON, and
//! text in many scripts), and on adversarial runs short enough for the
//! reference's quadratic merge; bounds on runs far too long for it.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use switchboard::admit::tokens::{count_text, Cancel};
use tiktoken_rs::CoreBPE;

fn reference() -> &'static CoreBPE {
    tiktoken_rs::o200k_base_singleton()
}

fn ours(text: &str) -> u64 {
    count_text(text, u64::MAX, &Cancel::default()).expect("not cancelled")
}

fn check(label: &str, text: &str) {
    let want = reference().encode_ordinary(text).len() as u64;
    assert_eq!(
        ours(text),
        want,
        "{label}: {:?}",
        &text[..text.len().min(80)]
    );
}

fn corpus_files() -> Vec<std::path::PathBuf> {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut out = vec![
        root.join("README.md"),
        root.join("LICENSE"),
        root.join("conf/catalog.json"),
    ];
    let mut dirs = vec![
        root.join("src"),
        root.join("docs"),
        root.join("tests/golden"),
    ];
    while let Some(d) = dirs.pop() {
        for e in std::fs::read_dir(&d).expect("corpus dir").flatten() {
            let p = e.path();
            if p.is_dir() {
                dirs.push(p);
            } else {
                out.push(p);
            }
        }
    }
    out.sort();
    out
}

#[test]
fn repository_text_counts_as_the_reference_does() {
    let mut files = 0;
    for path in corpus_files() {
        let Ok(text) = std::fs::read_to_string(&path) else {
            continue;
        };
        check(&path.display().to_string(), &text);
        for (i, line) in text.lines().enumerate().step_by(7) {
            check(&format!("{}:{}", path.display(), i + 1), line);
        }
        files += 1;
    }
    assert!(files > 100, "corpus too small: {files} files");
}

const SCRIPTS: &[&str] = &[
    "The quick brown fox jumps over the lazy dog. I'll've been there, they'd said; it's fine — isn't it?",
    "Ünïcödé façade, naïve café, jalapeño, Straße, ŒUVRE, İstanbul, ǅemal.",
    "Съешь же ещё этих мягких французских булок, да выпей чаю.",
    "Ξεσκεπάζω την ψυχοφθόρα βδελυγμία.",
    "日本語のテキストとカタカナ、ひらがな、漢字を混ぜた文章です。",
    "中文文本：我们在测试分词器的正确性，包括标点符号。",
    "한국어 문장도 함께 시험합니다. 띄어쓰기와 숫자 12345.",
    "النص العربي مع علامات التشكيل: مَرْحَبًا بِالْعَالَمِ",
    "עברית: שלום עולם! מספרים 2026.",
    "हिन्दी पाठ: नमस्ते दुनिया, यह एक परीक्षण है।",
    "ภาษาไทยไม่มีช่องว่างระหว่างคำ",
    "Emoji 😀👍🏽👨‍👩‍👧‍👦 🇫🇷 ✨ and symbols ∑∫√∞ ≠ ≤ ≥ → ⇒",
    "Combining marks: e\u{301}e\u{301}e\u{301} a\u{308}\u{304} Z\u{336}a\u{337}l\u{338}g\u{335}o",
    "Numbers 3.14159265358979 1,234,567 0x7fff_ffff 1e-10 -42 +7 2026-11-23T15:24:27Z",
    "Whitespace:\t\ttabs,   spaces,\r\nCRLF\r\n\r\n\n\n  trailing   \n   ",
    "fn main() {\n    let v: Vec<u8> = (0..10).map(|i| i * 2).collect();\n    println!(\"{v:?}\");\n}\n",
    "{\"model\":\"openai/gpt-5\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"temperature\":0.7}",
    "https://example.com/path/to/resource?query=value&other=1#fragment user@example.org",
    "aGVsbG8gd29ybGQgdGhpcyBpcyBiYXNlNjQgZW5jb2RlZCB0ZXh0IQ==",
    "CamelCaseIdentifiersAndALLCAPSWordsAndsnake_case_words_mixedUP",
];

#[test]
fn text_in_many_scripts_counts_as_the_reference_does() {
    for s in SCRIPTS {
        check("script", s);
    }
    let all = SCRIPTS.join("\n");
    check("all scripts", &all);
    // every prefix cut at a char boundary of a mixed sample
    let mixed = SCRIPTS[..6].join(" ");
    for (i, _) in mixed.char_indices().step_by(5) {
        check("prefix", &mixed[..i]);
    }
}

/// Units repeated into runs: one character (ASCII, multi-byte, combining),
/// digits, punctuation, whitespace, and short mixed patterns.
const UNITS: &[&str] = &[
    "a", "b", "A", "é", "中", "😀", "\u{301}", "7", "!", ".", "-", "/", " ", "\n", "\t", "\r\n",
    "ab", "aB", "a ", " a", "1a", "a1", "!a", ". ", "'s", "🇫🇷", "ـ",
];

#[test]
fn adversarial_runs_count_as_the_reference_does() {
    for unit in UNITS {
        for reps in [1usize, 2, 3, 5, 17, 64, 255, 1000, 2500] {
            check(&format!("{unit:?} x {reps}"), &unit.repeat(reps));
        }
    }
}

#[test]
fn runs_far_too_long_for_the_reference_are_counted_within_bounds() {
    // 3 MiB of one character: tiktoken's merge would need ~10^13 steps here.
    for unit in ["a", "b", "é", "中", "😀", "7", "!", " ", "\n", "ab"] {
        let reps = (3 << 20) / unit.len();
        let text = unit.repeat(reps);
        let n = ours(&text);
        // A token holds at most 128 bytes of o200k text, and at least one byte.
        assert!(
            n >= (text.len() / 128) as u64 && n <= text.len() as u64,
            "{unit:?}: {n} tokens for {} bytes",
            text.len()
        );
        // Counting is deterministic and additive over identical halves within one token per cut.
        let half = ours(&unit.repeat(reps / 2));
        assert!(n.abs_diff(2 * half) <= 2, "{unit:?}: {n} vs 2 x {half}");
    }
}
