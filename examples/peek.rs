use shareq::tui::fixtures;
fn main() {
    for (name, snap) in [("aws", fixtures::aws()), ("lab", fixtures::lab())] {
        for (w, h) in [(80, 24), (160, 48)] {
            let mut app = fixtures::app(snap.clone());
            println!("=== {name} {w}x{h}");
            print!("{}", fixtures::render_text(&mut app, w, h));
        }
    }
}
