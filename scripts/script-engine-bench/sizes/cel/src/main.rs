fn main() {
    let req: serde_json::Value = serde_json::from_str(&std::env::args().nth(1).unwrap_or("{\"a\":1}".into())).unwrap();
    let env = std::sync::Arc::new(cel::Env::stdlib());
    let p = env.compile("{\"out\": req.a * 2u}").unwrap();
    let mut ctx = cel::Context::with_env(env);
    ctx.add_variable_from_value("req", cel::to_value(&req).unwrap());
    println!("{}", p.execute(&ctx).unwrap().json().unwrap());
}
