"""A three-step graph that knows nothing about RL: write a text, count its words, summarise.

python -m experiments.hello --version 2026.11.30          # print the plan
python -m experiments.hello --version 2026.11.30 --run    # build it (a second run serves it)
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

import click

from rlaunch import storage
from rlaunch.artifacts import Artifact, ArtifactStep, StepContext, resolve_version
from rlaunch.cli import build_options

TEXT = (
    "An experiment is a versioned artifact graph. Every step has a name and a version, "
    "and a step with a calendar version is built once and then served from storage."
)


@dataclass(frozen=True)
class TextFile(Artifact):
    characters: int


@dataclass(frozen=True)
class WordCounts(Artifact):
    total: int
    distinct: int


@dataclass(frozen=True)
class Summary(Artifact):
    line: str


def write_text(config: dict) -> TextFile:
    url = storage.join(config["output_path"], "text.txt")
    storage.write_text_atomic(url, config["text"])
    return TextFile(path=config["output_path"], characters=len(config["text"]))


def count_words(config: dict) -> WordCounts:
    words = storage.read_text(storage.join(config["text_path"], "text.txt")).lower().split()
    counts = Counter(w.strip(".,") for w in words)
    storage.write_json_atomic(storage.join(config["output_path"], "counts.json"), dict(counts.most_common()))
    return WordCounts(path=config["output_path"], total=len(words), distinct=len(counts))


def summarise(config: dict) -> Summary:
    line = f"{config['total']} words, {config['distinct']} distinct, top {config['top']}: {config['top_words']}"
    storage.write_text_atomic(storage.join(config["output_path"], "summary.txt"), line + "\n")
    return Summary(path=config["output_path"], line=line)


def text_step(text: str) -> ArtifactStep[TextFile]:
    return ArtifactStep(
        name="hello/text",
        version=resolve_version("hello/text", None),
        artifact_type=TextFile,
        run=write_text,
        build_config=lambda ctx: {"output_path": ctx.output_path, "text": text},
    )


def counts_step(text: ArtifactStep[TextFile]) -> ArtifactStep[WordCounts]:
    return ArtifactStep(
        name="hello/counts",
        version=resolve_version("hello/counts", None),
        artifact_type=WordCounts,
        run=count_words,
        build_config=lambda ctx: {"output_path": ctx.output_path, "text_path": ctx.artifact_path(text)},
        deps=(text,),
    )


def summary_step(counts: ArtifactStep[WordCounts], top: int) -> ArtifactStep[Summary]:
    def build(ctx: StepContext) -> dict:
        config = {"output_path": ctx.output_path, "counts_path": ctx.artifact_path(counts), "top": top}
        if ctx.is_fingerprint:
            return config
        value = ctx.resolved(counts)
        table = storage.read_json(storage.join(value.path, "counts.json"))
        return {**config, "total": value.total, "distinct": value.distinct, "top_words": list(table)[:top]}

    return ArtifactStep(
        name="hello/summary",
        version=resolve_version("hello/summary", None),
        artifact_type=Summary,
        run=summarise,
        build_config=build,
        deps=(counts,),
    )


@click.command()
@click.option("--top", default=3, show_default=True, help="How many frequent words the summary lists.")
@build_options
def main(top: int) -> ArtifactStep[Summary]:
    return summary_step(counts_step(text_step(TEXT)), top)


if __name__ == "__main__":
    main()
