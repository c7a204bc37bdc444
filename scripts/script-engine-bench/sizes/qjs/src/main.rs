fn main() {
    let req = std::env::args().nth(1).unwrap_or("{\"a\":1}".into());
    let rt = rquickjs::Runtime::new().unwrap();
    let ctx = rquickjs::Context::full(&rt).unwrap();
    let out = ctx.with(|ctx| {
        let f: rquickjs::Function = ctx.eval("(function(req){ return { out: req.a * 2 }; })").unwrap();
        let v = ctx.json_parse(req).unwrap();
        let r: rquickjs::Value = f.call((v,)).unwrap();
        ctx.json_stringify(r).unwrap().unwrap().to_string().unwrap()
    });
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    println!("{v}");
}
