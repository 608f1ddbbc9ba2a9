"""`rlaunch fit`: the preflight without an experiment. It judges the plan its flags describe with
`check_plan` (the same codes), prints the defaults it used, and every plan it offers passes the
preflight."""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from experiments import rl_plan_example as example
from rlaunch.cli.admin import main as rlaunch_main
from rlaunch.dotted import set_path
from rlaunch.skyrl import ModelFacts, SkyRLCriticPlan, SkyRLRolePlan, SkyRLTopology, check_plan
from tests.support.specs import applied

REPO = Path(__file__).resolve().parents[2]
QWEN3_8B_JSON = "experiments/configs/qwen3-8b/config.json"
QWEN3_8B = ModelFacts.from_hf_config(example.QWEN3_8B_CONFIG)
NEAREST = ". Nearest plans that fit: "
# The recipe fit states when given none: its token budget and the explicit settings (its printed defaults).
FILLED = {
    "trainer": {
        "max_prompt_length": 1024,
        "ckpt_interval": 20,
        "hf_save_interval": -1,
        "resume_mode": "latest",
        "logger": "console",
    },
    "generator": {"sampling_params": {"max_generate_length": 3072}},
}


def run(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(rlaunch_main, ["fit", *args])
    return result.exit_code, result.output


def codes(out: str) -> list[str]:
    """The violation codes fit printed, in order."""
    return re.findall(r"^  \[([a-z_.]+)\] ", out, flags=re.M)


def suggestions(out: str) -> list[list[str]]:
    """Every plan fit offered (a refusal's nearest plans, or the `what would fit` section), as its changes."""
    found = []
    for line in out.splitlines():
        if NEAREST in line:
            found += re.findall(r"\(\d+\) [^:]+: (.*?) \(tightest row", line.split(NEAREST, 1)[1])
        elif line.startswith("  ") and "(tightest row" in line:
            found.append(line.strip().split(": ", 1)[1].split(" (tightest", 1)[0])
    return [plan.split(", ") for plan in found]


def colocated(gpus: int = 8, nodes: int = 1, gpu: str = "H100", tp: int = 1, **plan: Any) -> SkyRLTopology:
    """The plan fit describes for `--gpus --nodes --gpu --engine-tp` and the batch flags' defaults."""
    role_plan = SkyRLRolePlan(
        **{
            "colocate_all": True,
            "policy_num_nodes": nodes,
            "policy_num_gpus_per_node": gpus,
            "num_inference_engines": max(1, nodes * gpus // tp),
            "inference_engine_tensor_parallel_size": tp,
            "inference_engine_pipeline_parallel_size": 1,
            "inference_engine_data_parallel_size": 1,
            "inference_engine_expert_parallel_size": 1,
            "train_batch_size": 256,
            "policy_mini_batch_size": 64,
            "micro_train_batch_size_per_gpu": 2,
            "n_samples_per_prompt": 8,
            **plan,
        }
    )
    return SkyRLTopology(num_nodes=nodes, gpus_per_node=gpus, gpu_variant=gpu, role_plan=role_plan)


def model_file(tmp_path: Path, **config: Any) -> str:
    path = tmp_path / "config.json"
    path.write_text(json.dumps({**example.QWEN3_8B_CONFIG, **config}), encoding="utf-8")
    return str(path)


def test_a_plan_that_fits_says_so_and_prints_every_default_it_used() -> None:
    code, out = run("--model", QWEN3_8B_JSON, "--gpu", "H100", "--gpus", "8")
    assert code == 0, out
    assert "on 1 node(s) x 8 H100, every role colocated: policy 1 node(s), 8 engine(s) x TP1 x DP1" in out
    assert "micro batch 2, 1024 + 3072 tokens:" in out
    (defaults,) = [line for line in out.splitlines() if line.startswith("defaults used: ")]
    for default in (
        "--engine-tp 1",
        "--train-batch-size 256",
        "--mini-batch-size 64",
        "--micro-batch-size 2",
        "--n-samples 8",
        "--policy-nodes 1",
        "--engines 8",
        "trainer.max_prompt_length=1024",
        "generator.sampling_params.max_generate_length=3072",
        "--host-memory not known",
    ):
        assert default in defaults.split("; ") or any(d.startswith(default) for d in defaults.split("; ")), default
    assert "per device: H100" in out and "the preflight (check_plan): 0 violation(s)" in out
    assert out.rstrip().endswith("fits: every row is ok and the preflight passes")


def test_a_flag_given_is_not_a_default_and_sets_the_plan() -> None:
    code, out = run(
        "--model", QWEN3_8B_JSON, "--gpu", "H100", "--gpus", "8", "--engine-tp", "2", "--prompt-length", "512"
    )
    assert code == 0, out
    assert "4 engine(s) x TP2 x DP1" in out and "512 + 3072 tokens" in out
    defaults = out.split("defaults used: ", 1)[1].splitlines()[0].split("; ")
    assert "--engine-tp 1" not in defaults and "--engines 4" in defaults
    assert (
        "trainer.max_prompt_length=1024" not in defaults
        and "generator.sampling_params.max_generate_length=3072" in defaults
    )


def test_a_plan_that_does_not_fit_prints_nearest_plans_and_each_passes_the_preflight() -> None:
    code, out = run("--model", QWEN3_8B_JSON, "--gpu", "L4", "--gpus", "4")
    assert code == 1, out
    assert "does not fit as asked (REFUSED)." in out and codes(out)[0] == "memory.model_states"
    asked = colocated(gpus=4, gpu="L4")
    assert codes(out) == [v.code for v in check_plan(asked, FILLED, "fsdp", model=QWEN3_8B)]
    plans = suggestions(out)
    assert plans
    for changes in plans:
        assert check_plan(*applied(asked, FILLED, changes), "fsdp", model=QWEN3_8B) == [], changes


def test_a_tp_that_does_not_divide_the_heads_is_refused_with_the_tps_a_node_holds(tmp_path: Path) -> None:
    """A 28-head model on 8-GPU nodes at TP 8: the preflight's model.tp_heads, never `fits`; the TPs
    offered divide 28 and a node (not 7, 14 or 28)."""
    config = model_file(tmp_path, num_attention_heads=28, num_key_value_heads=4, hidden_size=3584)
    code, out = run("--model", config, "--gpu", "H100", "--gpus", "8", "--engine-tp", "8")
    assert code == 1 and "fits:" not in out, out
    assert codes(out) == ["model.tp_heads"]
    assert "Fix: choose TP among the divisors of 28 whose engines fill a 8-GPU node: [1, 2, 4]\n" in out
    assert "fits in memory, but the preflight refuses the plan (above)." in out


def test_an_ambiguous_gpu_is_refused_with_the_devices_it_could_mean() -> None:
    code, out = run("--model", QWEN3_8B_JSON, "--gpu", "A100", "--gpus", "8")
    assert code == 1 and codes(out) == ["topology.gpu_variant_ambiguous"], out
    assert "Fix: set topology.gpu_variant to one of A100-40GB, A100-80GB\n" in out
    code, out = run("--model", QWEN3_8B_JSON, "--gpu", "A100-80GB", "--gpus", "8")
    assert code == 0 and "per device: A100-80GB" in out, out


def test_the_recipe_decides_the_token_budget_and_fit_fills_only_what_it_lacks(tmp_path: Path) -> None:
    recipe = tmp_path / "recipe.yaml"
    recipe.write_text(
        "generator:\n  sampling_params: {max_generate_length: 31744}\ntrainer: {max_prompt_length: 1024}\n"
    )
    code, out = run("--model", QWEN3_8B_JSON, "--gpu", "L4", "--gpus", "8", "--recipe", str(recipe))
    assert code == 1 and "32768 tokens x 147456 B" in out, out  # 1024 + 31744: the recipe's
    defaults = out.split("defaults used: ", 1)[1].splitlines()[0].split("; ")
    assert "trainer.ckpt_interval=20" in defaults
    assert not any(d.startswith(("trainer.max_prompt_length", "generator.sampling_params")) for d in defaults)
    code, out = run(
        "--model", QWEN3_8B_JSON, "--gpu", "L4", "--gpus", "8", "--recipe", str(recipe), "--generate-length", "1024"
    )
    assert "1024 + 1024 tokens" in out  # the flag wins over the recipe


def test_a_model_directory_and_an_experiments_model_step_read_the_same_config() -> None:
    _, from_file = run("--model", QWEN3_8B_JSON, "--gpu", "H100", "--gpus", "8")
    _, from_directory = run("--model", "experiments/configs/qwen3-8b", "--gpu", "H100", "--gpus", "8")
    code, from_step = run("--model", "experiments.rl_plan_example:pretrained_model", "--gpu", "H100", "--gpus", "8")
    assert code == 0, from_step
    assert from_step.splitlines()[0].startswith("experiments.rl_plan_example:pretrained_model (models/qwen3-8b) (")
    assert from_file.splitlines()[1:] == from_directory.splitlines()[1:] == from_step.splitlines()[1:]


def test_the_shipped_config_is_the_examples_qwen3_8b() -> None:
    shipped = json.loads((REPO / QWEN3_8B_JSON).read_text(encoding="utf-8"))
    assert {k: shipped[k] for k in example.QWEN3_8B_CONFIG} == example.QWEN3_8B_CONFIG
    assert ModelFacts.from_hf_config(shipped) == QWEN3_8B


@pytest.mark.parametrize(
    ("model", "message"),
    [
        ("nope.json", "--model nope.json: no such config.json or directory"),
        ("experiments.rl_plan_example:no_such_step", "--model experiments.rl_plan_example:no_such_step: cannot import"),
        ("experiments.rl_plan_example:gsm8k_source", "declares no config.json"),
        ("experiments.rl_plan_example:RUNTIME", "not a model step"),
    ],
)
def test_a_model_it_cannot_read_is_a_clear_error(model: str, message: str) -> None:
    code, out = run("--model", model, "--gpu", "H100", "--gpus", "8")
    assert code != 0 and message in out, out


def test_a_model_it_cannot_size_says_so(tmp_path: Path) -> None:
    odd = tmp_path / "odd.json"
    odd.write_text(json.dumps({"model_type": "no-such-architecture"}))
    code, out = run("--model", str(odd), "--gpu", "H100", "--gpus", "8")
    assert code == 1 and "not sized: cannot size the model" in out, out


def test_bad_input_names_the_option() -> None:
    code, out = run("--model", QWEN3_8B_JSON, "--gpu", "H100", "--gpus", "0")
    assert code != 0 and "--gpus" in out, out


def test_a_critic_adds_its_rows_and_gae() -> None:
    code, out = run("--model", QWEN3_8B_JSON, "--gpu", "H100", "--gpus", "8", "--critic")
    assert code == 0 and "1024 + 3072 tokens, a critic:" in out, out
    assert "  critic     model states" in out and "  critic     training step" in out
    code, out = run("--model", QWEN3_8B_JSON, "--gpu", "H100", "--gpus", "8")
    assert "critic" not in out


def test_disaggregated_engines_take_the_nodes_the_policy_leaves() -> None:
    code, out = run("--model", QWEN3_8B_JSON, "--gpu", "H100", "--gpus", "8", "--nodes", "2", "--disaggregate")
    assert code == 0, out
    assert "engines on nodes of their own: policy 1 node(s), 8 engine(s) x TP1 x DP1" in out
    code, out = run(
        "--model", QWEN3_8B_JSON, "--gpu", "H100", "--gpus", "8", "--nodes", "2", "--disaggregate", "--engine-dp", "8"
    )
    assert code == 0 and "1 engine(s) x TP1 x DP8" in out, out


def llama_70b(tmp_path: Path) -> str:
    """Llama-3-70B's shape: 64 heads, 8 KV heads, 80 layers."""
    return model_file(
        tmp_path,
        model_type="llama",
        architectures=["LlamaForCausalLM"],
        hidden_size=8192,
        intermediate_size=28672,
        num_hidden_layers=80,
        num_attention_heads=64,
        num_key_value_heads=8,
        head_dim=128,
        vocab_size=128256,
    )


def test_an_offload_is_offered_only_with_the_host_memory_for_it(tmp_path: Path) -> None:
    """70B on one node of 8 H200: offloading the policy's states needs ~1051 GiB of host memory a
    node (16 bytes a parameter); it is offered with that need stated, or with a node that holds it,
    and not on a node of 1 TiB (no more than 90 % of it is planned)."""
    config = llama_70b(tmp_path)
    offload = "config_yaml.trainer.policy.fsdp_config.cpu_offload=true"
    _, unknown = run("--model", config, "--gpu", "H200", "--gpus", "8")
    (offered,) = [p for p in suggestions(unknown) if offload in p]
    assert "; the offload needs 1051.33 GiB of host memory a node)" in unknown
    _, enough = run("--model", config, "--gpu", "H200", "--gpus", "8", "--host-memory", "1169")
    assert offered in suggestions(enough)
    _, short = run("--model", config, "--gpu", "H200", "--gpus", "8", "--host-memory", "1168")
    assert suggestions(short) and not any(offload in p for p in suggestions(short))


def test_the_engine_weights_fix_names_a_tp_the_heads_and_node_hold(tmp_path: Path) -> None:
    """70B on 8 H100 at TP 1: the weights need 3 shards; 3 is no TP for 64 heads on 8 GPUs: 4 is offered."""
    _, out = run("--model", llama_70b(tmp_path), "--gpu", "H100", "--gpus", "8")
    assert (
        "Fix: set inference_engine_tensor_parallel_size=4 and num_inference_engines=2 (the smallest TP of at least 3"
        in out
    )
    assert "at least 3," not in out


HEADS = [28, 32, 40, 64]


@st.composite
def fit_cases(draw: st.DrawFn) -> tuple[dict[str, Any], list[str], SkyRLTopology, dict[str, Any], int | None]:
    """A model shape, an allocation, a TP, a token budget, batch sizes, a reference or none and a
    node's host memory: fit's flags, and the plan, recipe and host memory they describe, written out
    here (colocated, or disaggregated on half the nodes)."""
    heads = draw(st.sampled_from(HEADS))
    config = {
        **example.QWEN3_8B_CONFIG,
        "num_attention_heads": heads,
        "num_key_value_heads": draw(st.sampled_from([4, 8])),
        "hidden_size": heads * 128,
        "num_hidden_layers": draw(st.sampled_from([24, 36, 64])),
    }
    gpus, nodes = draw(st.sampled_from([1, 2, 4, 8])), draw(st.sampled_from([1, 2]))
    tp, colocate = draw(st.sampled_from([1, 2, 3, 4, 7, 8])), draw(st.booleans())
    gpu = draw(st.sampled_from(["L4", "H100", "A100-80GB", "H200", "A100"]))
    train, mini = draw(st.sampled_from([64, 256, 324])), draw(st.sampled_from([16, 64, 96]))
    micro, n = draw(st.sampled_from([1, 2, 16])), draw(st.sampled_from([1, 8]))
    prompt, generate = draw(st.sampled_from([512, 1024])), draw(st.sampled_from([1024, 3072, 16384]))
    reference, host_gib = draw(st.booleans()), draw(st.sampled_from([None, 64, 2048]))
    policy_nodes = nodes if colocate else max(1, nodes // 2)
    rollout = policy_nodes * gpus if colocate else (nodes - policy_nodes) * gpus
    topo = colocated(
        gpus=gpus,
        nodes=nodes,
        gpu=gpu,
        tp=tp,
        colocate_all=colocate,
        policy_num_nodes=policy_nodes,
        num_inference_engines=max(1, rollout // tp),
        train_batch_size=train,
        policy_mini_batch_size=mini,
        micro_train_batch_size_per_gpu=micro,
        n_samples_per_prompt=n,
    )
    tree = json.loads(json.dumps(FILLED))
    set_path(tree, "trainer.max_prompt_length", prompt)
    set_path(tree, "generator.sampling_params.max_generate_length", generate)
    set_path(tree, "trainer.algorithm.use_kl_loss", reference)
    if not reference:
        set_path(tree, "trainer.algorithm.use_kl_in_reward", False)
    args = [
        "--reference" if reference else "--no-reference",
        *(() if host_gib is None else ("--host-memory", str(host_gib))),
        *("--gpu", gpu, "--gpus", str(gpus), "--nodes", str(nodes), "--engine-tp", str(tp)),
        *("--train-batch-size", str(train), "--mini-batch-size", str(mini), "--micro-batch-size", str(micro)),
        *("--n-samples", str(n), "--prompt-length", str(prompt), "--generate-length", str(generate)),
        "--colocate" if colocate else "--disaggregate",
    ]
    return config, args, topo, tree, None if host_gib is None else host_gib * 2**30


def offered_numbers(fix: str, code: str, topo: SkyRLTopology) -> list[list[str]]:
    """The edits a violation's fix proposes with a number, as changes (TP with the engines that keep the
    rollout GPUs; a mini batch), for the codes whose fix lists numbers."""
    plan = topo.role_plan
    width = plan.inference_engine_data_parallel_size * plan.inference_engine_pipeline_parallel_size
    rollout = plan.num_inference_engines * plan.inference_engine_tensor_parallel_size * width
    listed = re.search(r": \[([\d, ]+)\]", fix)
    numbers = [int(x) for x in listed.group(1).split(", ")] if listed else []
    if code == "model.tp_heads":
        return [
            [
                f"role_plan.inference_engine_tensor_parallel_size={t}",
                f"role_plan.num_inference_engines={rollout // (t * width)}",
            ]
            for t in numbers
            if rollout % (t * width) == 0
        ]
    if code == "batch.train_mini":
        return [[f"role_plan.policy_mini_batch_size={m}"] for m in numbers]
    if code == "memory.engine_weights" and (
        set_tp := re.search(r"tensor_parallel_size=(\d+) and num_inference_engines=(\d+)", fix)
    ):
        return [
            [
                f"role_plan.inference_engine_tensor_parallel_size={set_tp[1]}",
                f"role_plan.num_inference_engines={set_tp[2]}",
            ]
        ]
    return []


@settings(max_examples=30, deadline=None, derandomize=True)
@given(case=fit_cases())
def test_fit_returns_check_plans_codes_and_every_suggestion_passes_it(
    case: tuple[dict[str, Any], list[str], SkyRLTopology, dict[str, Any], int | None],
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    config, args, topo, tree, host = case
    path = tmp_path_factory.mktemp("model") / "config.json"
    path.write_text(json.dumps(config), encoding="utf-8")
    model = ModelFacts.from_hf_config(config)
    code, out = run("--model", str(path), *args)
    found = check_plan(topo, tree, "fsdp", model=model, host_memory_bytes=host)
    assert codes(out) == [v.code for v in found], out
    assert [str(v) for v in found] == [line[2:] for line in out.splitlines() if re.match(r"  \[[a-z_.]+\] ", line)]
    assert (code == 0) == ("fits: every row is ok and the preflight passes" in out) == (found == [] and code == 0)
    needs = [float(x) for x in re.findall(r"the offload needs ([\d.]+) GiB of host memory a node", out)]
    assert host is None or all(need <= 0.9 * host / 2**30 for need in needs), needs
    before = {v.code for v in found if not v.code.startswith("memory.")}
    for changes in suggestions(out):
        after = {v.code for v in check_plan(*applied(topo, tree, changes), "fsdp", model=model)}
        assert after <= before and not {c for c in after if c.startswith("memory.")}, (changes, after)
    for v in found:
        for changes in offered_numbers(v.fix, v.code, topo):
            after = check_plan(*applied(topo, tree, changes), "fsdp", model=model)
            assert v.code not in {a.code for a in after}, (v.code, changes)
            new = {a.code for a in after} - {b.code for b in found}
            assert all(c.startswith("memory.") for c in new), (v.code, changes, new)  # memory: its own fix


def test_the_critic_plan_it_describes_is_the_preflights() -> None:
    """--critic on colocated GPUs: the critic's plan is the policy's GPUs with the mini batch."""
    topo = colocated()
    critic = dataclasses.replace(topo, role_plan=dataclasses.replace(topo.role_plan, critic=SkyRLCriticPlan(1, 8, 64)))
    tree = json.loads(json.dumps(FILLED))
    set_path(tree, "trainer.algorithm.advantage_estimator", "gae")
    code, out = run("--model", QWEN3_8B_JSON, "--gpu", "H100", "--gpus", "8", "--critic")
    assert code == 0 and check_plan(critic, tree, "fsdp", model=QWEN3_8B) == [], out
