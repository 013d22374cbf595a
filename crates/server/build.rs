//! Compiles `csrc/long_double.c` (`INCRBYFLOAT`'s `long double` arithmetic, as Redis does it)
//! and generates the command table from `src/commands/meta.json` and
//! `src/commands/table.toml` (see `build/table.rs`).

#[path = "build/table.rs"]
mod table;

fn main() {
    println!("cargo:rerun-if-changed=csrc/long_double.c");
    cc::Build::new()
        .file("csrc/long_double.c")
        .warnings(true)
        .compile("tamer_long_double");

    println!("cargo:rerun-if-changed=build/table.rs");
    println!("cargo:rerun-if-changed=src/commands/meta.json");
    println!("cargo:rerun-if-changed=src/commands/table.toml");
    println!("cargo:rerun-if-changed=src/acl/universe.rs");
    let meta = std::fs::read_to_string("src/commands/meta.json").expect("meta.json");
    let toml = std::fs::read_to_string("src/commands/table.toml").expect("table.toml");
    let out = std::env::var("OUT_DIR").expect("OUT_DIR");
    let universe = std::fs::read_to_string("src/acl/universe.rs").expect("universe.rs");
    let (spec, table) = table::generate(&meta, &toml, &universe);
    let out = std::path::Path::new(&out);
    std::fs::write(out.join("command_spec.rs"), spec).expect("writing the flags");
    std::fs::write(out.join("command_table.rs"), table).expect("writing the table");
}
