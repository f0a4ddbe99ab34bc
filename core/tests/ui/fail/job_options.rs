#[starling::job(target_instances = 2)]
fn no_pool() -> u32 {
    1
}

#[starling::job(pool = "p", target_instances = 2, min_instances = 3)]
fn too_many() -> u32 {
    1
}

#[starling::job(pool = "p", target_instance = 2)]
fn misspelt() -> u32 {
    1
}

fn main() {}
