//! Canonical printing of types and the signature hash that goes into a function's registered name.
//!
//! The registered name must be the same for the driver and every worker built from the same
//! source, and should change when the signature changes, so that a worker from another build fails
//! with a clear error instead of decoding bytes as the wrong type. Printing therefore works on
//! tokens only, never on source text: whitespace, comments and the way the lexer split `>>` do not
//! change the result. The same printer gives readable types for error messages and docs.

use proc_macro2::{Delimiter, TokenStream, TokenTree};
use quote::ToTokens;

/// Prints tokens in one canonical layout, close to what rustfmt writes for types
/// (`HashMap<String, Vec<u8>>`, `&mut [u8; 4]`, `fn(u8) -> u8`).
pub(crate) fn canonical(tokens: &impl ToTokens) -> String {
    let mut out = String::new();
    write_stream(&mut out, tokens.to_token_stream());
    out
}

/// What the previous token was, which is all that decides whether a space goes before the next.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Prev {
    /// Start of a group or of the output: never a space.
    Open,
    /// An identifier or literal: another word after it needs a space (`dyn Trait`, `as Trait`).
    Word,
    /// A keyword that prefixes a type (`mut`, `const`, `dyn`, `impl`): a space before whatever follows.
    Prefix,
    /// A lifetime's quote: the name follows without a space.
    Quote,
    /// Punctuation that hugs the next token (`&`, `::`, `<`, `>`, `*`).
    Tight,
    /// Punctuation that is followed by a space (`,`, `;`, `->`, `+`, `=`).
    Spaced,
    /// A closed group, which reads like a word (`(u8) -> u8`).
    Group,
}

/// Keywords after which a type follows, so even `(` and `[` are separated from them by a space.
const PREFIX_KEYWORDS: &[&str] = &["mut", "const", "dyn", "impl", "as", "in", "for", "where"];

fn write_stream(out: &mut String, stream: TokenStream) {
    let mut prev = Prev::Open;
    let mut tokens = stream.into_iter().peekable();
    while let Some(token) = tokens.next() {
        let space_before_word =
            matches!(prev, Prev::Word | Prev::Prefix | Prev::Spaced | Prev::Group);
        match token {
            TokenTree::Ident(ident) => {
                if space_before_word {
                    out.push(' ');
                }
                let text = ident.to_string();
                prev = if PREFIX_KEYWORDS.contains(&text.as_str()) {
                    Prev::Prefix
                } else {
                    Prev::Word
                };
                out.push_str(&text);
            }
            TokenTree::Literal(lit) => {
                if space_before_word {
                    out.push(' ');
                }
                out.push_str(&lit.to_string());
                prev = Prev::Word;
            }
            TokenTree::Punct(punct) => {
                let next_is_gt =
                    matches!(tokens.peek(), Some(TokenTree::Punct(p)) if p.as_char() == '>');
                match punct.as_char() {
                    // A trailing comma in generic arguments means nothing, so it is dropped; in
                    // parentheses it is kept, because `(u8,)` is a tuple and `(u8)` is not.
                    ',' if next_is_gt => {}
                    ch @ (',' | ';') => {
                        out.push(ch);
                        prev = Prev::Spaced;
                    }
                    '-' if next_is_gt => {
                        tokens.next();
                        out.push_str(" ->");
                        prev = Prev::Spaced;
                    }
                    ch @ ('+' | '=') => {
                        if prev != Prev::Open {
                            out.push(' ');
                        }
                        out.push(ch);
                        prev = Prev::Spaced;
                    }
                    '\'' => {
                        if space_before_word {
                            out.push(' ');
                        }
                        out.push('\'');
                        prev = Prev::Quote;
                    }
                    // `&`, `*`, `<` and `!` can start a type, which after `,` or `dyn` takes a
                    // space; the rest of the punctuation (`::`, `>`, `?`) always hugs.
                    ch => {
                        if matches!(ch, '&' | '*' | '<' | '!')
                            && matches!(prev, Prev::Spaced | Prev::Prefix)
                        {
                            out.push(' ');
                        }
                        out.push(ch);
                        prev = Prev::Tight;
                    }
                }
            }
            TokenTree::Group(group) => {
                let (open, close) = match group.delimiter() {
                    Delimiter::Parenthesis => ("(", ")"),
                    Delimiter::Bracket => ("[", "]"),
                    Delimiter::Brace => ("{", "}"),
                    // Invisible groups come from `macro_rules!` fragments; they print as their
                    // contents so a type reads the same whether or not a macro produced it.
                    Delimiter::None => ("", ""),
                };
                // A group directly after a word is a call-like form (`Fn(u8)`), otherwise it
                // starts a type of its own.
                let space = match group.delimiter() {
                    Delimiter::None => space_before_word,
                    Delimiter::Parenthesis => matches!(prev, Prev::Prefix | Prev::Spaced),
                    Delimiter::Bracket | Delimiter::Brace => {
                        matches!(prev, Prev::Prefix | Prev::Spaced | Prev::Word)
                    }
                };
                if space {
                    out.push(' ');
                }
                out.push_str(open);
                write_stream(out, group.stream());
                out.push_str(close);
                prev = if group.delimiter() == Delimiter::None {
                    Prev::Word
                } else {
                    Prev::Group
                };
            }
        }
    }
}

/// The 64-bit FNV-1a hash: tiny, dependency-free, and fixed forever (unlike `DefaultHasher`,
/// whose algorithm may change between Rust releases and would then rename every function).
pub(crate) fn fnv1a64(bytes: &[u8]) -> u64 {
    const OFFSET_BASIS: u64 = 0xcbf2_9ce4_8422_2325;
    const PRIME: u64 = 0x0000_0100_0000_01b3;
    bytes.iter().fold(OFFSET_BASIS, |hash, &byte| {
        (hash ^ u64::from(byte)).wrapping_mul(PRIME)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ty(src: &str) -> String {
        canonical(&syn::parse_str::<syn::Type>(src).unwrap())
    }

    #[test]
    fn fnv1a64_matches_reference_vectors() {
        // Vectors from the FNV reference implementation.
        assert_eq!(fnv1a64(b""), 0xcbf29ce484222325);
        assert_eq!(fnv1a64(b"a"), 0xaf63dc4c8601ec8c);
        assert_eq!(fnv1a64(b"foobar"), 0x85944171f73967e8);
    }

    #[test]
    fn prints_types_like_rustfmt() {
        assert_eq!(ty("Vec < u8 >"), "Vec<u8>");
        assert_eq!(
            ty("std :: collections :: HashMap<String,Vec<Vec<u8>>>"),
            "std::collections::HashMap<String, Vec<Vec<u8>>>"
        );
        assert_eq!(ty("& 'a mut [ u8 ; 4 ]"), "&'a mut [u8; 4]");
        assert_eq!(ty("(i64,String)"), "(i64, String)");
        assert_eq!(ty("()"), "()");
        assert_eq!(ty("fn(u8)->u8"), "fn(u8) -> u8");
        assert_eq!(
            ty("Box<dyn Fn(u8) -> u8 + Send + 'static>"),
            "Box<dyn Fn(u8) -> u8 + Send + 'static>"
        );
        assert_eq!(ty("impl Iterator<Item=u8>"), "impl Iterator<Item = u8>");
        assert_eq!(ty("*const u8"), "*const u8");
        assert_eq!(ty("<T as Trait>::Out"), "<T as Trait>::Out");
    }

    #[test]
    fn printing_ignores_whitespace_and_token_splitting() {
        assert_eq!(ty("Vec<Vec<u8>>"), ty("Vec< Vec <u8> >"));
        assert_eq!(
            ty("Result<Vec<u8>,String>"),
            ty("Result <\n  Vec<u8>,\n  String,\n>")
        );
    }
}
