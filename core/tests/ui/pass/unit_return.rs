//! Functions that return nothing give an `ObjectRef<()>`, which callers can still wait on.

use starling::ObjectRef;

#[starling::remote]
fn log(line: String) {
    let _ = line;
}

#[starling::remote]
fn explicit_unit() -> () {}

#[starling::remote]
fn no_args_no_result() {}

#[allow(dead_code)]
fn submit() {
    let _a: ObjectRef<()> = log::remote("hello".to_owned());
    let _b: ObjectRef<()> = explicit_unit::remote();
    let _c: ObjectRef<()> = no_args_no_result::options().num_cpus(0.0).remote();
}

fn main() {
    log("direct".to_owned());
}
