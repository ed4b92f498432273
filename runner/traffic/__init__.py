"""The traffic a run replays, read on the driver: request traces, prompt files in the formats people have, and
conversations rendered as chat requests. Pure apart from the files and the tokenizer handed in."""
