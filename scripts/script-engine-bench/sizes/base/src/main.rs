fn main() {
    let req: serde_json::Value = serde_json::from_str(&std::env::args().nth(1).unwrap_or("{\"a\":1}".into())).unwrap();
    println!("{}", serde_json::json!({"in": req}));
}
