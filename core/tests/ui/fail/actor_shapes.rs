// What an actor cannot be: no constructor, a method taking `self`, `&mut self` beside an async
// method (an async actor's calls run together), a borrowed argument, a constructor of another
// type.
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

    fn bump(&mut self) {}

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

pub struct Threaded;

#[starling::actor(max_concurrency = 4)]
impl Threaded {
    fn new() -> Self {
        Threaded
    }

    fn bump(&mut self) {}
}

pub struct Unknown;

#[starling::actor(max_restarts = 4)]
impl Unknown {
    fn new() -> Self {
        Unknown
    }
}

fn main() {}
