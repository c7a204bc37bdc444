fn main() {
    let req: serde_json::Value = serde_json::from_str(&std::env::args().nth(1).unwrap_or("{\"a\":1}".into())).unwrap();
    let e = rhai::Engine::new();
    let ast = e.compile("#{ out: req.a * 2 }").unwrap();
    let mut scope = rhai::Scope::new();
    scope.push_dynamic("req", rhai::serde::to_dynamic(&req).unwrap());
    let r: rhai::Dynamic = e.eval_ast_with_scope(&mut scope, &ast).unwrap();
    println!("{}", rhai::serde::from_dynamic::<serde_json::Value>(&r).unwrap());
}
