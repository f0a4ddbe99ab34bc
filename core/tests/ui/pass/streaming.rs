#[derive(Debug)]
struct Failure;

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("failure")
    }
}

#[starling::remote]
fn squares(n: u64) -> impl Iterator<Item = u64> {
    (0..n).map(|i| i * i)
}

#[starling::remote(num_cpus = 0.5)]
fn words(text: String) -> Result<impl Iterator<Item = String> + Send, Failure> {
    let words: Vec<String> = text.split(' ').map(str::to_string).collect();
    Ok(words.into_iter())
}

#[starling::remote]
fn countdown(n: u32) -> starling::Generator<u32> {
    starling::Generator::new((0..n).rev())
}

#[starling::remote]
async fn later(n: u64) -> starling::Generator<Vec<u8>> {
    starling::Generator::new((0..n).map(|i| vec![i as u8]))
}

#[allow(dead_code)]
fn calls() {
    let _: starling::ObjectRefGenerator<u64> = squares::remote(3);
    let _: starling::ObjectRefGenerator<String> =
        words::options().backpressure(4).remote("a b");
    let mut c: starling::ObjectRefGenerator<u32> = countdown::remote(2);
    let _: Option<starling::Result<starling::ObjectRef<u32>>> = c.next();
    let _: &starling::ObjectRef<u64> = c.completed();
    let _: starling::ObjectRefGenerator<Vec<u8>> = later::remote(1);
}

fn main() {}
