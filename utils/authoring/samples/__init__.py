"""Sample answers per lesson: MISTAKES (plausible wrong cells) and VARIANTS (other correct solutions)."""
