#!/usr/bin/env python3
"""make_corpus.py — the word corpus of the GloVe fixture (deterministic: Python's random with seed 23).

    python3 make_corpus.py > corpus.txt

Lowercase words separated by single spaces, one sentence per line, drawn from a small world of countries,
capitals, languages, animals and numbers, so that the co-occurrence matrix has structure and a long tail.
"""
import random

rng = random.Random(23)
countries = {"france": ("paris", "french"), "japan": ("tokyo", "japanese"), "italy": ("rome", "italian"),
             "spain": ("madrid", "spanish"), "egypt": ("cairo", "arabic"), "peru": ("lima", "spanish"),
             "kenya": ("nairobi", "swahili"), "china": ("beijing", "chinese"), "russia": ("moscow", "russian"),
             "greece": ("athens", "greek"), "brazil": ("brasilia", "portuguese"), "canada": ("ottawa", "english"),
             "india": ("delhi", "hindi"), "germany": ("berlin", "german"), "norway": ("oslo", "norwegian")}
animals = {"dog": "woof", "cat": "meow", "cow": "moo", "duck": "quack", "owl": "hoot", "lion": "roar",
           "sheep": "baa", "frog": "croak"}
fillers = ["very", "old", "big", "small", "busy", "quiet", "famous", "green", "cold", "warm"]
lines = []
for _ in range(1500):
    k = rng.random()
    c = rng.choice(list(countries))
    cap, lang = countries[c]
    if k < 0.35:
        lines.append(f"the capital of {c} is {cap}")
    elif k < 0.55:
        lines.append(f"people in {c} speak {lang}")
    elif k < 0.7:
        a = rng.choice(list(animals))
        lines.append(f"the {a} says {animals[a]} and the {rng.choice(list(animals))} sleeps")
    elif k < 0.85:
        d = rng.choice(list(countries))
        lines.append(f"we flew from {cap} to {countries[d][0]} in a {rng.choice(fillers)} plane")
    else:
        n = rng.randrange(0, 40)
        lines.append("count " + " ".join(str(n + i) for i in range(rng.randrange(3, 8))))
print("\n".join(lines))
