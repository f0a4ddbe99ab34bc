//! The original function stays an ordinary function, and the stub's registered name is the module
//! path, the function name and a 16-digit signature hash.

#[starling::remote]
fn add(a: i64, b: i64) -> i64 {
    a + b
}

#[starling::remote]
async fn double(x: u32) -> u32 {
    x * 2
}

#[starling::remote]
fn r#match(args: u8, _: u8) -> u8 {
    args
}

mod nested {
    #[starling::remote]
    pub fn add(a: i64, b: i64) -> i64 {
        a - b
    }
}

fn main() {
    assert_eq!(add(1, 2), 3);
    assert_eq!(nested::add(1, 2), -1);
    assert_eq!(r#match(4, 5), 4);
    let as_fn: fn(i64, i64) -> i64 = add;
    assert_eq!(as_fn(2, 2), 4);
    let _future = double(2);

    let (path, hash) = add::NAME.split_once('#').unwrap();
    assert_eq!(path, concat!(module_path!(), "::add"));
    assert_eq!(hash.len(), 16);
    assert!(hash.bytes().all(|b| b.is_ascii_hexdigit()));
    assert!(nested::add::NAME.starts_with(concat!(module_path!(), "::nested::add#")));
    assert!(r#match::NAME.starts_with(concat!(module_path!(), "::match#")));
    // Same signature, same hash; the module path tells the two functions apart.
    assert_eq!(
        add::NAME.split_once('#').unwrap().1,
        nested::add::NAME.split_once('#').unwrap().1
    );
    assert_ne!(add::NAME, nested::add::NAME);
    assert_ne!(double::NAME.split_once('#').unwrap().1, hash);
}
