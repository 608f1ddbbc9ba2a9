"""The violation codes written outside `rlaunch.rules.CODES`, which the host's registry test and the
violations reference both allow."""

from __future__ import annotations

# Codes about the recipe's YAML text, raised while parsing or rendering `config_yaml`; a launch
# document has no such text (its `skyrl` section is typed as a mapping by the schema).
RECIPE_TEXT_CODES = {"recipe.not_text", "recipe.invalid_yaml", "recipe.not_mapping"}
# Judged on the experiment side only: the facts data artifacts recorded (rlaunch.rules.data_rules), read by
# the plan and by the RL step once its inputs are built, before the host is handed the document.
EXPERIMENT_SIDE_CODES = {"data.missing_field"}
