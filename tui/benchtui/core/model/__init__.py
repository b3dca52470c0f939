"""The session model: runs folded from events, their statistics, efficiency and framework ratios."""
