struct Counter {
    total: u64,
}

impl Counter {
    #[starling::remote]
    fn bump(&self, by: u64) -> u64 {
        self.total + by
    }
}

fn main() {}
