"""The store reader (drills/measure/ckpt_store.py): each framework's layout, complete vs. a save that never ended.
Layouts as each framework writes them (sources in the module's docstring)."""

from drills.measure.ckpt_store import Entry, parse_find, pointer_files, read_store, store_root_of


def _ls(*paths):
    return [Entry(p.rstrip("/"), p.endswith("/")) for p in paths]


def test_megatron_the_tracker_decides_and_an_iteration_past_it_is_unfinished():
    entries = _ls("iter_0006000/", "iter_0006000/mp_rank_00/", "iter_0007500/", "iter_0007500/mp_rank_00/",
                  "latest_checkpointed_iteration.txt")
    assert pointer_files(entries) == ["latest_checkpointed_iteration.txt"]
    got = read_store(entries, {"latest_checkpointed_iteration.txt": "6000\n"})
    assert got.framework == "megatron" and got.readable
    assert got.latest_complete.step == 6000
    assert [c.step for c in got.incomplete] == [7500]
    assert "never completed" in got.incomplete[0].evidence


def test_megatron_without_a_tracker_holds_nothing_complete():
    got = read_store(_ls("iter_0006000/"), {})
    assert got.latest_complete is None and got.incomplete[0].step == 6000


def test_megatron_torch_dist_needs_its_metadata_json():
    entries = _ls("iter_0000002/", "iter_0000002/.metadata", "iter_0000002/__0_0.distcp", "iter_0000002/common.pt",
                  "iter_0000001/", "iter_0000001/.metadata", "iter_0000001/metadata.json",
                  "latest_checkpointed_iteration.txt")
    got = read_store(entries, {"latest_checkpointed_iteration.txt": "2"})
    assert got.latest_complete.step == 1
    assert "metadata.json" in got.incomplete[0].evidence


def test_megatron_a_tracker_naming_a_missing_iteration_is_a_problem():
    got = read_store(_ls("iter_0006000/", "latest_checkpointed_iteration.txt"),
                     {"latest_checkpointed_iteration.txt": "7500"})
    assert got.problem and "7500" in got.problem and not got.readable


def test_deepspeed_latest_names_the_tag():
    entries = _ls("global_step100/", "global_step100/mp_rank_00_model_states.pt", "global_step200/", "latest")
    got = read_store(entries, {"latest": "global_step100"})
    assert got.framework == "deepspeed" and got.latest_complete.name == "global_step100"
    assert [c.step for c in got.incomplete] == [200]


def test_hf_trainer_state_is_the_last_file_and_tmp_checkpoint_never_counts():
    entries = _ls("checkpoint-500/", "checkpoint-500/trainer_state.json", "checkpoint-500/model.safetensors",
                  "checkpoint-1000/", "checkpoint-1000/model.safetensors", "tmp-checkpoint-1500/",
                  "tmp-checkpoint-1500/trainer_state.json")
    got = read_store(entries, {})
    assert got.framework == "hf-trainer" and got.latest_complete.step == 500
    assert [c.step for c in got.incomplete] == [1000, 1500]
    assert "never renamed" in got.incomplete[1].evidence


def test_lightning_files_with_a_step_and_last_ckpt_names_none():
    got = read_store(_ls("epoch=0-step=100.ckpt", "epoch=1-step=200.ckpt", "last.ckpt"), {})
    assert got.framework == "lightning" and got.latest_complete.step == 200 and not got.incomplete


def test_nemo_unfinished_marker():
    entries = _ls("m--val_loss=1.2-step=99-consumed_samples=800.0/", "m--val_loss=1.2-step=99-consumed_samples=800.0-last/",
                  "m--val_loss=1.1-step=199-consumed_samples=1600.0/", "m--val_loss=1.1-step=199-consumed_samples=1600.0-unfinished")
    got = read_store(entries, {})
    assert got.framework == "nemo" and got.latest_complete.step == 99 and got.incomplete[0].step == 199


def test_torchtitan_dcp_metadata():
    got = read_store(_ls("step-10/", "step-10/.metadata", "step-20/", "step-20/__0_0.distcp"), {})
    assert got.framework == "dcp" and got.latest_complete.step == 10 and got.incomplete[0].step == 20


def test_an_unknown_layout_is_unreadable_never_guessed():
    got = read_store(_ls("model_final.pth", "logs/"), {})
    assert got.framework is None and not got.readable and "no checkpoint layout" in got.problem
    assert read_store([], {}).problem == "the checkpoint directory holds an empty directory"


def test_parse_find_and_the_store_root_of_a_save_path():
    entries = parse_find("/ckpt/job", "/ckpt/job\n/ckpt/job/checkpoint-5\n", "/ckpt/job/checkpoint-5/trainer_state.json\n")
    assert entries == [Entry("checkpoint-5", True), Entry("checkpoint-5/trainer_state.json", False)]
    assert store_root_of("/ckpt/job/checkpoint-6000") == "/ckpt/job"
    assert store_root_of("/ckpt/job/tmp-checkpoint-6000") == "/ckpt/job"
    assert store_root_of("/ckpt/job/global_step6000/mp_rank_00_model_states.pt") == "/ckpt/job"
    assert store_root_of("/ckpt/job/epoch=0-step=6000.ckpt") == "/ckpt/job"
    assert store_root_of("/ckpt/job") == "/ckpt/job"


def test_mmengine_last_checkpoint_names_the_latest_complete_iteration_file():
    entries = _ls("iter_500.pth", "iter_1000.pth", "iter_1500.pth", "last_checkpoint", "20250802_121506/")
    assert pointer_files(entries) == ["last_checkpoint"]
    got = read_store(entries, {"last_checkpoint": "/work_dirs/fastscnn/iter_1000.pth"})
    assert got.framework == "mmengine" and got.latest_complete.step == 1000
    assert [c.step for c in got.incomplete] == [1500]


def test_a_pointer_naming_an_empty_directory_is_not_a_complete_checkpoint():
    """Red team (wave 5): the tracker names 7500, `iter_0007500/` exists and holds nothing (a store that kept the
    directory and lost the data): the pointer's word is not enough, the store's own contents decide."""
    entries = [Entry("iter_0006000", True), Entry("iter_0006000/mp_rank_00", True), Entry("iter_0007500", True),
               Entry("latest_checkpointed_iteration.txt", False)]
    got = read_store(entries, {"latest_checkpointed_iteration.txt": "7500"})
    assert got.latest_complete.step == 6000
    assert [c.evidence for c in got.incomplete] == ["latest_checkpointed_iteration.txt names 7500 but iter_0007500/ "
                                                    "holds nothing: no shard to load"]
    ds = read_store([Entry("global_step100", True), Entry("latest", False)], {"latest": "global_step100"})
    assert ds.latest_complete is None and "holds nothing" in ds.incomplete[0].evidence
