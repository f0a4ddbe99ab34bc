// What an actor cannot be: no constructor, a method taking `self`, an async method.
pub struct NoCtor;

#[starling::actor]
impl NoCtor {
    fn get(&self) -> u64 {
        1
    }
}

pub struct Shapes;

#[starling::actor]
impl Shapes {
    fn new() -> Self {
        Shapes
    }

    fn consume(self) -> u64 {
        1
    }

    async fn later(&self) -> u64 {
        1
    }

    fn borrowed(&self, s: &str) -> usize {
        s.len()
    }
}

pub struct BadCtor;

#[starling::actor]
impl BadCtor {
    fn new() -> u64 {
        1
    }
}

fn main() {}
