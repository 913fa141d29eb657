//! The files the whole cluster shares besides the rack map (docs/blame.md,
//! "Files the whole cluster shares"): a topology file that cannot be read
//! or does not parse, and an address map that cannot be read, is refused
//! (another user could write it), or does not parse. Each is the same on
//! every node, so a bad one is the job's fault: the prolog of an `--imex`
//! job records the cause, which the SPANK plugin fails the job with, says
//! it in one line, and exits 0. The node is not drained.

mod common;
use common::*;

#[test]
fn a_bad_topology_file_fails_the_job_and_drains_nothing() {
    let node = ImexNode::new();
    let topo = node.path("topology.yaml");
    let config = node.config(
        "rack_map = \"none\"\n",
        &format!(
            "[slurm]\nconfig = \"none\"\ntopology = \"{}\"\n",
            topo.display()
        ),
    );
    let refused = |needles: &[&str], case: &str| {
        node.assert_jobs_fault(&node.prolog(&config), &topo, needles, case)
    };
    write_mode(&topo, b"- topology: [unclosed\n", 0o644);
    refused(&[], "a topology.yaml that does not parse");
    std::fs::remove_file(&topo).unwrap();
    refused(&[], "a topology file that is not there");
}

#[test]
fn a_bad_address_map_fails_the_job_and_drains_nothing() {
    let node = ImexNode::new();
    let map = node.path("imex-addresses.toml");
    let config = node.config(
        "rack_map = \"none\"\n",
        &format!(
            "[slurm]\nconfig = \"none\"\ntopology = \"none\"\n[imex.addresses]\nsource = \"map\"\nmap_file = \"{}\"\n",
            map.display()
        ),
    );
    let refused = |needles: &[&str], case: &str| {
        node.assert_jobs_fault(&node.prolog(&config), &map, needles, case)
    };
    write_mode(&map, b"n1 = [unclosed\n", 0o644);
    refused(&[], "an address map that does not parse");
    write_mode(&map, b"n1 = \"10.0.0.1\"\nn2 = \"10.0.0.2\"\n", 0o666);
    refused(&["writable"], "an address map anyone can write");
    std::fs::remove_file(&map).unwrap();
    refused(&[], "an address map that is not there");
}
