//! The stub has the function's visibility, so a `pub` remote function is usable from other
//! modules through its path, and a private one inside its own module.

mod tasks {
    use serde::{Deserialize, Serialize};

    #[derive(Serialize, Deserialize)]
    pub struct Point {
        pub x: f64,
        pub y: f64,
    }

    /// Documented remote functions keep their docs.
    #[starling::remote]
    pub fn norm(p: Point) -> f64 {
        helper(p.x * p.x + p.y * p.y)
    }

    #[starling::remote]
    pub(crate) fn scale(p: Point, by: f64) -> Point {
        Point {
            x: p.x * by,
            y: p.y * by,
        }
    }

    #[starling::remote]
    fn private(x: u8) -> u8 {
        x
    }

    fn helper(x: f64) -> f64 {
        x.sqrt()
    }

    #[allow(dead_code)]
    pub fn submit_private() -> starling::ObjectRef<u8> {
        private::remote(1)
    }
}

use tasks::{norm, Point};

#[allow(dead_code)]
fn submit() {
    let p = tasks::scale::remote(Point { x: 3.0, y: 4.0 }, 2.0);
    let _n: starling::ObjectRef<f64> = norm::remote(p);
    let _m: starling::ObjectRef<f64> = tasks::norm::options()
        .num_cpus(1.0)
        .remote(Point { x: 0.0, y: 0.0 });
}

fn main() {
    assert_eq!(norm(Point { x: 3.0, y: 4.0 }), 5.0);
}
