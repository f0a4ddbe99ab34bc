// An actor: a constructor, `&self` and `&mut self` methods, values and refs as arguments, a
// `Result` constructor and method, options, a handle passed on.
use starling::ObjectRef;

pub struct Counter {
    n: u64,
}

#[starling::actor]
impl Counter {
    fn new(start: u64) -> Self {
        Counter { n: start }
    }

    fn incr(&mut self, by: u64) -> u64 {
        self.n += by;
        self.n
    }

    fn get(&self) -> u64 {
        self.n
    }

    fn parse_add(&mut self, text: String) -> Result<u64, std::num::ParseIntError> {
        self.n += text.parse::<u64>()?;
        Ok(self.n)
    }

    // Not a method (no receiver): left as it is.
    fn helper() -> u64 {
        1
    }
}

pub struct Fallible;

#[starling::actor]
impl Fallible {
    fn new(ok: bool) -> Result<Self, String> {
        if ok { Ok(Fallible) } else { Err("no".into()) }
    }
}

/// An async actor: `&self` methods, its state shared by its calls in flight.
pub struct Waiter {
    seen: std::sync::atomic::AtomicU64,
}

#[starling::actor]
impl Waiter {
    fn new() -> Self {
        Waiter { seen: std::sync::atomic::AtomicU64::new(0) }
    }

    async fn wait(&self, n: u64) -> u64 {
        self.seen.fetch_add(n, std::sync::atomic::Ordering::SeqCst) + n
    }

    async fn fallible(&self, ok: bool) -> Result<u64, String> {
        if ok { Ok(1) } else { Err("no".into()) }
    }

    fn seen(&self) -> u64 {
        self.seen.load(std::sync::atomic::Ordering::SeqCst)
    }
}

/// A threaded actor: `&self` methods run at once on threads of their own.
pub struct Pool {
    served: std::sync::atomic::AtomicU64,
}

#[starling::actor(max_concurrency = 4)]
impl Pool {
    fn new() -> Self {
        Pool { served: std::sync::atomic::AtomicU64::new(0) }
    }

    fn serve(&self) -> u64 {
        self.served.fetch_add(1, std::sync::atomic::Ordering::SeqCst) + 1
    }
}

#[starling::remote]
fn use_handle(c: CounterHandle) -> u64 {
    starling::get(&c.get()).unwrap()
}

#[allow(dead_code)]
fn calls() {
    let c: CounterHandle = Counter::remote(1);
    let r: ObjectRef<u64> = c.incr(2);
    let _: ObjectRef<u64> = c.incr(&r);
    let _: ObjectRef<u64> = c.parse_add("5".to_string());
    let _ = use_handle::remote(c.clone());
    let _named = Counter::options()
        .num_cpus(0.5)
        .name("c")
        .max_restarts(2)
        .max_task_retries(1)
        .lifetime_detached()
        .remote(0);
    let _: Option<CounterHandle> = starling::get_actor::<Counter>("c").unwrap();
    let _ = Fallible::remote(true);
    let _ = starling::kill(&c, true);
    let _ = Counter::helper();
    let w = Waiter::options().max_concurrency(8).remote();
    let _: ObjectRef<u64> = w.wait(3);
    let _: ObjectRef<u64> = w.fallible(true);
    let _: ObjectRef<u64> = w.seen();
    let p = Pool::options().max_concurrency(16).remote();
    let _: ObjectRef<u64> = p.serve();
}

fn main() {}
