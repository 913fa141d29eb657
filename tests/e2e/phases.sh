# shellcheck shell=bash
# The e2e phases: what cluster each needs and which tests it runs, in order.
# A test is a function test_* in the feature file named after what it
# proves (jobs.sh, shared-nodes.sh, blame.sh, doctor.sh, gpu-health.sh, switch.sh,
# topology.sh, rack-map.sh, rack-domains.sh, controller.sh, segments.sh,
# faults.sh, fleet.sh, gb200.sh, accounting.sh, metrics-store.sh, watch.sh, nvl72.sh, containers.sh, upgrade.sh,
# systemd.sh, prefix-install.sh, rpm-install.sh); tests/e2e/versions.sh picks
# the phases per Slurm.

# shellcheck disable=SC2034 # read by run.sh, which sources this file
PHASES="base slurm native switch topology segments faults fleet accounting rack containers upgrade systemd"

# The cluster a phase needs, exported before cluster.sh is sourced.
phase_environment() { # phase
  case "$1" in
    switch) export E2E_SWITCH=1;;
    # Two racks of two nodes; E2E_TOPOLOGY (conf or yaml) says how Slurm learns them.
    topology) export E2E_NODES=4 E2E_TOPOLOGY=${E2E_TOPOLOGY:-conf};;
    # The same racks beside switch/nvidia_imex, one channel per segment (25.11+).
    segments) export E2E_SWITCH=1 E2E_NODES=4 E2E_TOPOLOGY=${E2E_TOPOLOGY:-yaml};;
    # One NVL72 rack: 18 trays.
    rack) export E2E_NODES=18;;
    containers) export E2E_NODES=2 E2E_CONTAINERS=1;;
    # slurmdbd on MariaDB, Prometheus scraping every node's node_exporter.
    accounting) export E2E_NODES=4 E2E_ACCOUNTING=1;;
  esac
}

# The base phase's tests: the plugin, the domain and blame on this Slurm,
# the doctor, the GPU gate and the job database, the controller calls.
base_tests() {
  echo "
      test_plugin_is_accepted_by_this_slurm
      test_imex_job_gets_private_channel_and_domain
      test_job_without_imex_sees_no_channel
      test_misuse_is_rejected_at_submission
      test_srun_imex_inside_salloc
      test_second_imex_job_on_busy_node_is_refused
      test_a_second_imex_job_on_a_shared_node_waits_instead_of_failing
      test_peer_that_never_connects_fails_job_without_draining
      test_local_daemon_crash_drains_only_its_node
      test_an_imex_node_fault_drain_explains_itself_without_a_controller_storm
      test_epilog_is_idempotent_without_prolog
      test_doctor_passes_then_names_each_break
      test_prolog_killed_midway_then_epilog_restores_idle
      test_gpu_history_recorded_on_every_node
      test_pending_row_remap_drains_with_our_reason_and_requeues
      test_xid_79_before_a_job_drains_the_node
      test_xid_during_job_is_recorded_with_its_class
      test_a_jobs_gpu_use_is_recorded_per_gpu
      test_64_concurrent_epilogs_lose_no_rows
      test_an_imex_jobs_prologs_and_epilogs_ask_the_controller_nothing
      test_health_check_asks_the_controller_nothing_the_second_time
      test_doctor_reads_the_nodes_slurm_conf_when_the_controller_is_away"
}

# The phase's tests, one per line; nothing for an unknown phase.
phase_tests() { # phase
  case "$1" in
    base) base_tests;;
    # base less what no Slurm release changes (the GPU health gate and the
    # job database on the node), for a release whose way of installing
    # another release's base phase proves in full (scripts/slurm-releases).
    slurm) base_tests | grep -v -E '^ *test_(gpu_history_recorded_on_every_node|xid_79_before_a_job_drains_the_node|xid_during_job_is_recorded_with_its_class|a_jobs_gpu_use_is_recorded_per_gpu|64_concurrent_epilogs_lose_no_rows|prolog_killed_midway_then_epilog_restores_idle)$';;
    # base less what only Slurm and our shared code decide (controller
    # calls, the doctor, job_submit.lua, a busy or shared node), for another
    # architecture of a release whose base phase runs in full: what the
    # architecture's own build does, every GPU and database test kept.
    native) base_tests | grep -v -E '^ *test_(srun_imex_inside_salloc|second_imex_job_on_busy_node_is_refused|a_second_imex_job_on_a_shared_node_waits_instead_of_failing|an_imex_node_fault_drain_explains_itself_without_a_controller_storm|doctor_passes_then_names_each_break|doctor_reads_the_nodes_slurm_conf_when_the_controller_is_away|64_concurrent_epilogs_lose_no_rows|an_imex_jobs_prologs_and_epilogs_ask_the_controller_nothing|health_check_asks_the_controller_nothing_the_second_time|xid_79_before_a_job_drains_the_node)$';;
    # Beside switch/nvidia_imex: channels, plus the domain, readiness gate,
    # blame and teardown exactly as without it.
    switch) echo "
      test_switch_imex_job_gets_slurms_channel_for_its_user
      test_switch_job_without_imex_keeps_slurms_channel
      test_plugin_mode_beside_switch_keeps_one_tmpfs
      test_second_imex_job_on_busy_node_is_refused
      test_peer_that_never_connects_fails_job_without_draining
      test_local_daemon_crash_drains_only_its_node
      test_prolog_killed_midway_then_epilog_restores_idle
      test_an_imex_jobs_prologs_and_epilogs_ask_the_controller_nothing
      test_health_check_asks_the_controller_nothing_the_second_time";;
    topology) echo "
      test_imex_job_across_two_blocks_forms_one_domain_per_block
      test_peer_fault_in_one_rack_names_the_peer_and_its_rack_and_drains_nothing
      test_span_refuse_fails_a_job_across_two_blocks_before_any_daemon_starts
      test_imex_job_inside_one_block_runs
      test_rack_map_splits_a_job_without_a_topology_file
      test_the_indexed_rack_map_splits_a_job_the_same_way
      test_an_indexed_map_written_from_the_topology_file_stands_for_it
      test_a_topology_file_that_contradicts_the_rack_map_fails_the_job_and_check_lists_it
      test_a_rack_map_that_contradicts_a_nodes_gpus_fails_the_job
      test_slurm_accepts_the_topology_the_fabric_describes
      test_rack_wide_domains_outlive_jobs_and_share_a_node_by_channel
      test_rack_wide_imex_jobs_share_a_node_through_the_guard
      test_rack_wide_channels_never_collide
      test_a_slow_controller_changes_no_rack
      test_an_imex_jobs_prologs_and_epilogs_ask_the_controller_nothing
      test_health_check_asks_the_controller_nothing_the_second_time";;
    segments) echo "
      test_each_segment_gets_its_own_channel_in_per_job_domains
      test_each_segment_gets_its_own_channel_in_rack_domains
      test_an_imex_jobs_prologs_and_epilogs_ask_the_controller_nothing
      test_health_check_asks_the_controller_nothing_the_second_time";;
    faults) echo "
      test_prolog_kill_9_at_every_state_change
      test_64_concurrent_prolog_epilog_pairs
      test_database_full_readonly_corrupt_never_fails_a_job
      test_second_user_cannot_open_the_channel";;
    # (and the daemons' command service and TLS files, once: no Slurm
    # release changes them)
    fleet) echo "
      test_node_exporter_serves_what_the_cli_reports
      test_epilog_logs_one_structured_journal_event
      test_the_command_port_refuses_other_nodes
      test_doctor_fails_a_command_service_open_to_the_network
      test_doctor_checks_the_daemons_tls_files
      test_recovery_action_5_cleared_by_the_fresh_domain_lets_the_imex_job_run
      test_recovery_action_5_that_persists_drains_only_its_node
      test_a_fabric_probe_completing_10s_into_the_prolog_starts_the_job
      test_check_on_a_driver_615_node_names_every_recovery_action";;
    # Four nodes: a 4-node --imex job across all its nodes, the node-fault
    # drains of a 4-node --imex job, and the domain watched while it runs.
    accounting) echo "
      test_an_imex_node_fault_drain_explains_itself_without_a_controller_storm
      test_a_jobs_health_across_its_nodes_for_its_owner_and_root_after_the_nodes_forget_it
      test_a_jobs_health_from_prometheus_over_tls_with_basic_auth_and_from_victoriametrics
      test_a_killed_daemon_is_restarted_and_the_jobs_next_step_finds_its_domain
      test_a_daemon_killed_past_the_bound_drains_only_its_node_after_the_job
      test_a_peer_cut_off_mid_job_is_named_on_its_peers_and_nothing_is_drained
      test_check_does_not_drain_a_node_whose_daemon_is_being_restarted";;
    rack) echo "
      test_rack_of_18_nodes_forms_one_domain";;
    containers) echo "
      test_container_sees_only_its_channel_with_enroots_default_dev
      test_plugin_order_does_not_matter
      test_restricted_dev_loses_the_channel_without_the_shipped_fstab
      test_restricted_dev_with_the_shipped_fstab_gives_back_exactly_the_channel";;
    upgrade) echo "
      test_upgrade_with_a_running_imex_job";;
    # Nodes booted with systemd 252 as PID 1 (E2E_SYSTEMD_ROOTFS), manager = "systemd".
    systemd) echo "
      test_systemd_starts_the_unit_on_the_job_config_and_stops_it
      test_imex_job_gets_private_channel_and_domain
      test_job_without_imex_sees_no_channel
      test_systemd_unit_that_fails_to_start_is_a_node_fault
      test_systemd_runs_a_burst_of_short_imex_jobs
      test_systemd_restarts_a_killed_daemon_and_names_the_signal
      test_peer_that_never_connects_fails_job_without_draining
      test_prolog_killed_midway_then_epilog_restores_idle
      test_epilog_is_idempotent_without_prolog
      test_gpu_history_recorded_on_every_node";;
  esac
  # Installed with install.sh into a prefix: its own uninstall test.
  [ "${E2E_INSTALL:-}" = prefix ] && echo test_install_sh_uninstall_keeps_only_the_config
  # Installed from the RPM: where it put everything, as Slurm uses it.
  [ "${E2E_INSTALL:-}" = rpm ] && echo test_rpm_installs_where_this_slurm_looks_and_verifies
  return 0
}

# The tests that run once the phase's cluster is down (no reset_nodes
# before them), one per line: the admin erasing the RPM (E2E_INSTALL=rpm).
phase_tests_after_down() { # phase
  [ "${E2E_INSTALL:-}" = rpm ] && echo test_rpm_erase_names_slurms_lines_first_and_keeps_only_an_edited_config
  return 0
}
