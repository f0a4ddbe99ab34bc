#[starling::remote]
fn count_words(text: &str) -> usize {
    text.split_whitespace().count()
}

fn main() {}
