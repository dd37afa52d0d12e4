"""Training helpers behind `recipes/sft.py` and `recipes/grpo.py`: the testable parts of the recipes.

`curriculum` parses the GRPO stage schedule out of a recipe YAML and lays it over one recorded
shuffled order; `stage_callback` switches the stages inside one trainer (a transformers callback);
`rewards` is the GRPO reward (the one judge, `grading.grade`) with logged statistics gated on it;
`rollout_func` adapts `thinc_bench.eval.rollout` to TRL's `rollout_func` hook; `injection` picks
the groups whose first executions fail (recovery training, eval's Recovery@k mechanism) and `faults`
draws their tracebacks from kinds eval never injects; `problem_stream` and `stream_rollout` are
DAPO's refill and ASTER's drop of solved problems; `dynamic_sampling` and `micro_batch` subclass
TRL's trainer to leave zero-variance groups out of the loss and to train each micro-batch at its own
width; `resume` finds the checkpoint a rerun continues from; `heldout` runs eval on a fixed subset
during training. The recipes themselves stay short linear scripts over TRL's trainers; nothing here
imports TRL.
"""

from thinc_bench.train.curriculum import Curriculum, Stage, load_curriculum, split_recipe_config
from thinc_bench.train.rewards import exact_match_reward

__all__ = ["Curriculum", "Stage", "exact_match_reward", "load_curriculum", "split_recipe_config"]
