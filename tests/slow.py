"""Which tests run only under ``pytest -m slow`` (issue 67 §5), and why.

The README's test command runs the rest in about five minutes on a 2-core machine; CI
(``.ci/run``) runs both, so every case below still runs before anything lands. A test is
here when it is the costly member of a family whose cheaper members run by default and
exercise the same code (a second calibrator file format, a second page of the guide, a
second kill-and-resume), or when it is a long end-to-end run (DDP, Ray, a killed sweep, a
sanitised build, the real-network studies) whose parts have fast tests of their own. Each
key is a test's node id (or its start: every parametrised variant); a key that matches no
collected test fails the run, so a renamed test cannot silently leave the slow set. Each
value is the test's seconds (setup, call and teardown, every variant of a key together, in
``pytest -m slow --durations=0`` on this 2-core machine, two workers) and why it is here;
``tests/conftest.py`` starts the costliest files first by those seconds.
"""

from __future__ import annotations

SLOW: dict[str, tuple[int, str]] = {
    # the guide: README.md, the home page and the quick start run by default; the longer
    # pages here
    "tests/test_guide_code.py::test_every_block_of_the_page_runs_as_copied[docs/tour.md]": (
        217,
        "trains, calibrates and exports as the tour does, every shell block on the "
        "files an earlier one made (its calibkit lines run warm, tests/warm_cli.py)",
    ),
    "tests/test_guide_code.py::test_every_block_of_the_page_runs_as_copied[docs/posthoc.md]": (
        74,
        "a grid search, a run trained, calibrated and exported to ONNX",
    ),
    "tests/test_guide_code.py::test_every_block_of_the_page_runs_as_copied[docs/metrics.md]": (
        15,
        "the metrics page, Lightning included (each metric has its own fast tests)",
    ),
    # the documentation site: CI builds it from the [docs] extra first and these check it
    "tests/test_docs_site.py": (
        124,
        "where CI has not built the site already, a build of 2 min",
    ),
    # post-hoc calibration: the slow members of families
    "tests/posthoc/test_calibrators.py::test_the_hundred_class_grid_of_docs_real_extends_past_its_top": (
        88,
        "Dir-ODIR's cross-validated grid at 100 classes",
    ),
    "tests/metrics/test_reference.py::test_pruned_temperature_search_equals_the_full_scan[float32": (
        13,
        "the float64 variants run by default; float32 only changes the rounding",
    ),
    "tests/metrics/test_consistency.py::test_level_at_perfect_calibration_and_power_against_over_confidence[100]": (
        63,
        "the 10-class study runs by default",
    ),
    # export: one calibrator of each output kind runs by default
    "tests/test_export.py::test_every_logits_calibrator_exports_to_the_same_numbers[hist-binning": (
        24,
        "binning's tables; ts, the affine maps and beta run by default",
    ),
    "tests/test_export.py::test_every_logits_calibrator_exports_to_the_same_numbers[isotonic:mode=one-vs-rest]": (
        29,
        "isotonic's other mode runs by default",
    ),
    "tests/test_export.py::test_every_logits_calibrator_exports_to_the_same_numbers[scaling-binning]": (
        12,
        "a binning table, as hist-binning's",
    ),
    "tests/test_export.py::test_every_logits_calibrator_exports_to_the_same_numbers[platt]": (
        10,
        "an affine map, as vs's and ms's",
    ),
    "tests/test_export.py::test_every_logits_calibrator_exports_to_the_same_numbers[ts-grid]": (
        2,
        "TS's graph, which runs by default",
    ),
    "tests/test_export.py::test_every_logits_calibrator_exports_to_the_same_numbers[dir-l2]": (
        4,
        "an affine map on log-probabilities, as matrix scaling's on logits",
    ),
    "tests/test_export.py::test_every_logits_calibrator_exports_to_the_same_numbers[dir-odir]": (
        2,
        "an affine map on log-probabilities, as dir-l2's",
    ),
    "tests/test_export.py::test_every_logits_calibrator_exports_to_the_same_numbers[ms-odir]": (
        2,
        "matrix scaling's affine map, with another penalty in the fit",
    ),
    "src/calibkit/export.py::calibkit.export.run_onnx": (
        6,
        "the API page's example exports a network; tests/test_export.py runs the same calls",
    ),
    "tests/test_export.py::test_confidence_maps_export_to_the_last_bit_on_a_real_network[hist-binning]": (
        22,
        "a real network; the other maps run by default",
    ),
    "tests/test_export.py::test_confidence_maps_export_to_the_last_bit_on_a_real_network[isotonic]": (
        12,
        "a real network; the other maps run by default",
    ),
    # data: the demo on other CPU code paths
    "tests/data/test_builtin.py::test_demo_logits_and_network_are_the_same_bits_on_every_cpu": (
        20,
        "two fresh interpreters train the demo in float64 again; every doctest that prints "
        "the demo's numbers runs by default",
    ),
    # training: kill, resume, DDP and the papers' runs
    "tests/training/test_trainer.py::test_resume_after_sigkill_mid_epoch_finishes_the_same_run": (
        124,
        "the packed run's kill-and-resume runs by default",
    ),
    "tests/training/test_trainer.py::test_two_gloo_processes_match_one_process": (
        46,
        "two processes; the meter's gloo sync runs by default",
    ),
    "tests/training/test_trainer.py::test_cifar_files_with_an_extra_split_flow_into_compare": (
        10,
        "CIFAR files end to end",
    ),
    "tests/training/test_maccal.py::test_the_default_batch_keeps_accuracy_on_a_small_training_split": (
        12,
        "a training run (the tour's digits CNN, stage 2 at three batches)",
    ),
    "src/calibkit/posthoc/_maccal.py::calibkit.posthoc._maccal.MacCal": (
        6,
        "the API page's example trains a head; tests/training/test_maccal.py fits it by default",
    ),
    "tests/training/test_maccal.py::test_heads_fitted_together_equal_each_fitted_alone[settings1]": (
        2,
        "the first setting runs by default",
    ),
    "tests/training/test_maccal.py::test_heads_fitted_together_equal_each_fitted_alone[settings2]": (
        2,
        "the first setting runs by default",
    ),
    "tests/training/test_packed.py::test_a_killed_packed_run_resumes_to_the_same_networks[during the renames]": (
        3,
        "the kill during the writes runs by default",
    ),
    "tests/training/test_packed.py::test_a_killed_packed_run_resumes_to_the_same_networks[between epochs]": (
        3,
        "the kill during the writes runs by default",
    ),
    "tests/metrics/test_reference.py::test_smooth_ece_matches_exact_integral[1]": (
        5,
        "a second drawn case; the first runs by default",
    ),
    "tests/metrics/test_intervals.py::test_coverage_of_the_chosen_intervals_small_study": (
        16,
        "a coverage study; each interval's own tests run by default",
    ),
    # the bench: engines, kills and the real-data runs
    "tests/bench/test_pack_and_status.py::test_a_pack_on_ray_is_one_task_holding_one_gpu": (
        84,
        "starts Ray",
    ),
    "tests/bench/test_pack_and_status.py::test_packed_stage_one_gives_the_numbers_of_networks_trained_alone": (
        33,
        "the trainer's packed tests run by default",
    ),
    "tests/bench/test_runner_report.py::test_ray_engine_gives_the_numbers_of_the_local_engine": (
        39,
        "starts Ray",
    ),
    "tests/bench/test_runner_report.py::test_a_sweep_killed_late_restarts_only_the_missing_runs": (
        32,
        "a killed sweep; the store's own kill tests run by default",
    ),
    "tests/bench/test_runner_report.py::test_a_killed_sweep_finishes_the_rest_once": (
        39,
        "a killed sweep",
    ),
    "tests/bench/test_runner_report.py::test_sigterm_stops_the_workers_without_leaking_semaphores": (
        26,
        "a signalled sweep",
    ),
    "tests/bench/test_runner_report.py::test_two_workers_give_the_numbers_of_one": (
        31,
        "two worker processes",
    ),
    # these read the killed sweep above (a 34 s module fixture, run once per worker that
    # needs it); tests/bench/test_report_trust.py reports synthetic stores by default
    "tests/bench/test_runner_report.py::test_each_run_records_its_phases_and_they_fit_inside_its_time": (
        0,
        "the killed sweep's phases",
    ),
    "tests/bench/test_runner_report.py::test_the_html_report_renders_in_headless_chromium": (
        10,
        "the killed sweep's report in Chromium",
    ),
    "tests/bench/test_runner_report.py::test_report_tables_follow_the_store": (
        3,
        "the killed sweep's tables",
    ),
    "tests/bench/test_runner_report.py::test_every_run_stores_paired_bootstrap_replicates": (
        0,
        "the killed sweep's replicates",
    ),
    "tests/bench/test_real.py::test_network_verdicts_split_by_class_count": (
        19,
        "the verdicts over every shared network's logits",
    ),
    "tests/bench/test_spec_store.py::test_parallel_writers_lose_no_row": (
        23,
        "parallel writers",
    ),
    "tests/bench/test_spec_store.py::test_a_process_killed_while_writing_leaves_whole_runs_only": (
        7,
        "a killed writer; the store's atomic-write tests run by default",
    ),
    "tests/bench/test_spec_store.py::test_workers_exit_when_the_bench_process_is_killed": (
        11,
        "a killed bench",
    ),
    "tests/bench/test_training_study.py::test_the_study_preset_runs_small_on_the_real_tree_and_resumes": (
        56,
        "the study on the real JPEG tree",
    ),
    "tests/bench/test_real.py::test_the_real_kinds_of_run_on_the_one_harness": (
        36,
        "real networks end to end",
    ),
    # peers and the rest
    "tests/test_adapters_lightning.py::test_real_ddp_with_the_default_callbacks_never_hangs": (
        30,
        "two DDP processes",
    ),
    "tests/test_adapters_lightning.py::test_two_ddp_processes_log_the_whole_validation_set": (
        31,
        "two DDP processes",
    ),
    "tests/test_adapters_torchmetrics.py::test_sync_across_two_gloo_processes": (
        11,
        "two processes; the meter's gloo sync runs by default",
    ),
    "tests/test_cli_json.py::test_training_calibrating_and_bench_commands": (
        6,
        "trains and runs a bench; the measuring commands' JSON runs by default",
    ),
    "tests/posthoc/test_calibrators.py::test_the_first_affine_fit_of_a_process_does_not_import_torch_dynamo": (
        6,
        "a fresh interpreter, guarding a start-up cost",
    ),
    "tests/models/test_models.py::test_features_head_contract[wrn-": (
        4,
        "the wide ResNets; their width and depth test builds them by default",
    ),
    "tests/test_adapters_sklearn.py::test_grid_search_over_odir_settings_scores_what_a_manual_loop_scores": (
        10,
        "a grid search",
    ),
    "tests/test_sklearn_conformance.py::test_n_jobs_gives_the_same_model": (
        12,
        "joblib workers",
    ),
    "tests/test_sklearn_own_tests.py": (
        69,
        "scikit-learn's own test_calibration.py with the class swapped, in a pytest of "
        "its own; tests/test_sklearn_calibration_cases.py carries its cases by default",
    ),
    "tests/test_sklearn_conformance.py::test_scikit_learn_checks[CalibratedClassifier(cv=3,estimator=LogisticRegression(),method='vector')": (
        18,
        "scikit-learn's checks on vector scaling; the same checks on ts and the defaults "
        "run by default",
    ),
    "tests/test_sklearn_conformance.py::test_scikit_learn_checks[CalibratedClassifier(cv=3,estimator=LogisticRegression(),method='isotonic')": (
        15,
        "the checks on isotonic's map; the same checks on ts and the prefit mode run by "
        "default, and isotonic's own estimator is checked by default",
    ),
    "tests/test_sklearn_conformance.py::test_scikit_learn_checks[CalibratedClassifier(cv=3,estimator=LogisticRegression(),method='sigmoid')": (
        8,
        "the checks on Platt's sigmoid; the same checks on ts and the prefit mode run by default",
    ),
    "tests/test_sklearn_conformance.py::test_scikit_learn_checks[CalibratedClassifier(cv=3,ensemble=False,": (
        8,
        "the checks on the one-map mode; the same checks on the ensemble of folds run by default",
    ),
    "tests/test_sklearn_conformance.py::test_every_logits_method_passes_the_checks_ts_passes[ms-odir]": (
        3,
        "matrix scaling's estimator with another penalty; its checks run by default",
    ),
    "tests/test_sklearn_conformance.py::test_every_logits_method_passes_the_checks_ts_passes[dir-odir]": (
        2,
        "dir-l2's estimator with another penalty; dir-l2's checks run by default",
    ),
    "tests/test_bad_inputs.py::test_a_sample_of_the_bad_input_sweep_is_clean": (
        19,
        "the sweep's sample; each case's own test runs by default",
    ),
    "tests/metrics/test_native_scan.py::test_the_kernel_is_clean_under_address_and_undefined_behaviour_sanitizers": (
        48,
        "compiles the kernel with sanitizers",
    ),
    "tests/metrics/test_properties.py::test_streaming_equals_one_shot_equals_merged_halves": (
        9,
        "many drawn cases; the meter's own tests run by default",
    ),
    "tests/models/test_checkpoint.py::test_the_shared_pretrained_resnets_score_their_recorded_accuracy": (
        26,
        "four ResNets on the CIFAR-10 test set",
    ),
}
