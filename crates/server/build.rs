//! Compiles `csrc/long_double.c`: `INCRBYFLOAT`'s `long double` arithmetic, as Redis does it.

fn main() {
    println!("cargo:rerun-if-changed=csrc/long_double.c");
    cc::Build::new()
        .file("csrc/long_double.c")
        .warnings(true)
        .compile("tamer_long_double");
}
