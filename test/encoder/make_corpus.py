"""Writes test/encoder/corpus.jsonl: the encoder validation inputs, all written here by hand or
generated deterministically (no downloads, no randomness that is not seeded).

One JSON object per line: {"id": ..., "kind": ..., "text": ...}, in a fixed order. Kinds:
  paraphrase  topic clusters of 5 related sentences; the id is "para-<topic>-<k>", so the topic
              (the cluster) is the id without its last "-<k>": nearest-neighbour recall is
              meaningful within the corpus
  short       unrelated short sentences (distractors for recall)
  long        texts past 256 tokens (some far past 512): truncation at max_seq_length 256
  empty, whitespace          "" and whitespace-only texts
  whitespace_runs            runs of spaces / tabs / newlines / CR around words
  accents     Latin text with diacritics (the tokenizer lowercases and strips accents)
  cjk         Chinese / Japanese / Korean
  emoji       emoji, ZWJ sequences, skin tones, flags, variation selectors
  rtl         Arabic / Hebrew / Persian, and mixed-direction text
  other_script  Cyrillic, Greek, Devanagari, Thai, ... (single-script text)
  code        code snippets
  numbers     numbers and punctuation runs
  long_word   very long single words (one "word" of hundreds of characters)
  mixed_case  the same words in different casing (must embed identically after lowercasing)
  control     control / zero-width / unusual Unicode characters

Usage: python3 test/encoder/make_corpus.py   (rewrites corpus.jsonl beside this file)
"""
import json
import os
import random

HERE = os.path.dirname(os.path.abspath(__file__))

CLUSTERS = {
    "weather": [
        "It is raining heavily outside today.",
        "There is a downpour going on right now.",
        "Today the rain is pouring down hard.",
        "The weather is wet and stormy this afternoon.",
        "Heavy rainfall is hitting the city at the moment.",
    ],
    "cooking": [
        "She baked a chocolate cake for her daughter's birthday.",
        "A chocolate birthday cake was made by the mother for her girl.",
        "For her child's birthday, she made a cocoa sponge cake in the oven.",
        "The mom prepared a homemade chocolate cake for the birthday party.",
        "Her daughter got a freshly baked chocolate cake on her birthday.",
    ],
    "football": [
        "The striker scored a goal in the final minute of the match.",
        "A last-minute goal by the forward won the soccer game.",
        "In stoppage time the attacker put the ball into the net.",
        "The team's center forward found the net just before the final whistle.",
        "A late strike decided the football match.",
    ],
    "programming": [
        "How do I reverse a list in Python?",
        "What is the way to invert the order of a Python list?",
        "Reversing an array in Python: which function should I use?",
        "In Python, how can I get the elements of a list backwards?",
        "Python list reversal, is there a built-in method?",
    ],
    "space": [
        "The rocket launched astronauts to the International Space Station.",
        "A crew was sent to the ISS aboard a rocket this morning.",
        "Astronauts lifted off toward the orbiting space station.",
        "The launch vehicle carried a crew of spacefarers into orbit to dock with the ISS.",
        "A manned spacecraft blasted off on its way to the space station.",
    ],
    "medicine": [
        "The doctor prescribed antibiotics for the bacterial infection.",
        "The physician gave the patient medication to treat a bacterial infection.",
        "An antibiotic course was prescribed to fight the infection.",
        "To cure the bacterial illness, the GP wrote a prescription for antibiotics.",
        "The patient received antibiotics from her doctor for an infection.",
    ],
    "finance": [
        "The central bank raised interest rates to fight inflation.",
        "Interest rates were increased by the central bank to curb rising prices.",
        "To control inflation, the monetary authority hiked borrowing costs.",
        "The Federal Reserve lifted its benchmark rate because prices keep climbing.",
        "Policy rates went up as the central bank tried to tame inflation.",
    ],
    "cats": [
        "The cat is sleeping on the windowsill in the sun.",
        "A kitten naps in the sunshine by the window.",
        "My cat dozes on the sunny window ledge.",
        "The feline is curled up asleep in a patch of sunlight near the window.",
        "A sleepy cat lies on the warm windowsill.",
    ],
    "travel": [
        "Our flight to Tokyo was delayed by three hours.",
        "The plane to Tokyo left three hours late.",
        "We waited an extra three hours before our Tokyo flight departed.",
        "A three-hour delay hit our airline trip to Japan's capital.",
        "Departure of the Tokyo-bound flight was pushed back three hours.",
    ],
    "music": [
        "He plays the guitar in a rock band on weekends.",
        "On Saturdays and Sundays he is the guitarist of a rock group.",
        "He strums electric guitar with his band every weekend.",
        "Weekends are for playing guitar in his rock band.",
        "He is a weekend guitarist for a local rock ensemble.",
    ],
    "climate": [
        "Global temperatures are rising because of greenhouse gas emissions.",
        "Greenhouse gases are causing the planet to warm.",
        "Carbon dioxide emissions drive global warming.",
        "The Earth is heating up due to the release of greenhouse gases.",
        "Climate change is caused by human emissions of CO2 and methane.",
    ],
    "cars": [
        "My car wouldn't start this morning because the battery was dead.",
        "The vehicle failed to start today due to a flat battery.",
        "A dead battery kept my automobile from starting this morning.",
        "This morning the engine wouldn't turn over; the battery had died.",
        "I couldn't start my car today since its battery was drained.",
    ],
    "education": [
        "The students are studying for their final exams.",
        "Pupils are revising for the end-of-year examinations.",
        "The class is preparing for their last tests of the semester.",
        "Learners are cramming for the final exam period.",
        "Students spend the evening reviewing notes before finals.",
    ],
    "gardening": [
        "Water the tomato plants every morning during the summer.",
        "In summer, the tomatoes need watering each morning.",
        "Tomato plants should be irrigated daily at dawn in hot months.",
        "Give your tomatoes water every day in the morning when it's summer.",
        "During the hot season, water tomato seedlings first thing each day.",
    ],
    "computers": [
        "My laptop keeps overheating and shutting down.",
        "The notebook computer gets too hot and turns itself off.",
        "My portable PC overheats and powers off unexpectedly.",
        "The laptop shuts down on its own because it gets very hot.",
        "Overheating makes my laptop switch off repeatedly.",
    ],
    "history": [
        "The Roman Empire fell in the fifth century.",
        "In the 400s AD the Western Roman Empire collapsed.",
        "Rome's empire came to an end during the fifth century.",
        "The fall of the Western Roman Empire happened in 476.",
        "Ancient Rome's imperial rule in the west ended in the 5th century.",
    ],
    "fitness": [
        "Running every day improves cardiovascular health.",
        "Daily jogging is good for your heart.",
        "Regular running strengthens the heart and blood vessels.",
        "A daily run boosts cardio fitness.",
        "Jogging each day benefits the cardiovascular system.",
    ],
    "shopping": [
        "Where can I buy cheap running shoes?",
        "Which store sells affordable sneakers for jogging?",
        "I'm looking for inexpensive trainers for running.",
        "Any recommendations for budget-friendly running footwear?",
        "Where to find low-cost jogging shoes?",
    ],
    "dogs": [
        "The dog barked at the mail carrier.",
        "A puppy was barking at the postman.",
        "The hound yelped loudly when the letter carrier arrived.",
        "Our dog barks every time the mailman comes.",
        "The canine barked at the person delivering the mail.",
    ],
    "coffee": [
        "I need a cup of coffee to wake up in the morning.",
        "Without my morning coffee I can't get going.",
        "An espresso in the morning is what wakes me up.",
        "I rely on coffee to start my day.",
        "A hot mug of coffee helps me feel awake each morning.",
    ],
    "law": [
        "The court ruled that the contract was invalid.",
        "The judge declared the agreement void.",
        "A tribunal found the contract to be unenforceable.",
        "The judgment held that the contract had no legal effect.",
        "The court decided the agreement was not legally binding.",
    ],
    "ocean": [
        "Whales migrate thousands of miles across the ocean every year.",
        "Each year whales travel huge distances through the sea.",
        "Humpback whales make long annual journeys across oceans.",
        "Whale migrations span thousands of kilometres annually.",
        "Every season, great whales swim across entire ocean basins.",
    ],
    "housing": [
        "Rent prices in the city have doubled in five years.",
        "Apartment rents in town are twice what they were five years ago.",
        "Over the past five years, urban rents have gone up by 100 percent.",
        "Housing costs for tenants in the city doubled since five years back.",
        "The cost of renting a flat in the city has doubled recently.",
    ],
    "chess": [
        "She checkmated her opponent in twenty moves.",
        "Her rival's king was mated after only twenty moves.",
        "The chess game ended in checkmate on move twenty.",
        "She won the chess match with a mate in 20.",
        "In just twenty moves she delivered checkmate.",
    ],
    "sleep": [
        "Getting eight hours of sleep is important for health.",
        "Adults should sleep about eight hours each night to stay healthy.",
        "A full night's rest of eight hours benefits your well-being.",
        "Good health requires roughly eight hours of sleep.",
        "Sleeping for eight hours a night keeps you healthy.",
    ],
    "internet": [
        "The Wi-Fi connection keeps dropping.",
        "My wireless internet disconnects all the time.",
        "The WiFi signal cuts out every few minutes.",
        "Our home network connection is unstable and drops.",
        "The wireless network keeps losing its connection.",
    ],
    "movies": [
        "The film won the award for best picture.",
        "The movie took home the top prize for best film.",
        "Best picture went to that motion picture at the ceremony.",
        "The feature film was honored as the year's best movie.",
        "That cinema release was named best picture.",
    ],
    "volcano": [
        "The volcano erupted, sending ash high into the sky.",
        "An eruption spewed volcanic ash into the atmosphere.",
        "Ash clouds rose from the erupting mountain.",
        "The volcanic eruption blasted a column of ash upward.",
        "Lava and ash burst from the volcano's crater.",
    ],
    "job": [
        "He got a new job as a software engineer.",
        "He was hired as a software developer.",
        "He started a new position as a programmer.",
        "He landed a role as a software engineer at a new company.",
        "His new employment is in software engineering.",
    ],
    "trains": [
        "The train to Berlin was cancelled because of the strike.",
        "A rail strike led to the cancellation of the Berlin train.",
        "Due to striking workers, the Berlin service did not run.",
        "The railway called off the train to Berlin due to industrial action.",
        "Strikes meant our train to Berlin was scrapped.",
    ],
}

SHORT = [
    "Hello world.",
    "Yes.",
    "No",
    "a",
    "The quick brown fox jumps over the lazy dog.",
    "I love you.",
    "What time is it?",
    "Please close the door.",
    "This is a test.",
    "The meeting is at noon.",
    "Paris is the capital of France.",
    "Water boils at 100 degrees Celsius.",
    "Two plus two equals four.",
    "She sells seashells by the seashore.",
    "Thank you very much!",
    "The library opens at nine.",
    "Bananas are yellow.",
    "Mount Everest is the highest mountain on Earth.",
    "The printer is out of paper.",
    "Photosynthesis converts light into chemical energy.",
    "He forgot his umbrella at the office.",
    "The bridge was painted red last spring.",
    "Knock knock.",
    "To be, or not to be, that is the question.",
    "Lorem ipsum dolor sit amet, consectetur adipiscing elit.",
    "[CLS] [SEP] [PAD] [MASK] [UNK]",
    "the [MASK] sat on the mat",
    "ok",
    "?",
    ".",
]

LONG_BASE = [
    ("The history of computing is a long story that begins with simple mechanical devices such as "
     "the abacus and continues through the programmable looms of the early nineteenth century, the "
     "analytical engine designed by Charles Babbage, and the electromechanical calculators of the "
     "nineteen thirties. During the Second World War, engineers built electronic machines that used "
     "vacuum tubes to break codes and compute artillery tables. After the war, the invention of the "
     "transistor made computers smaller, faster and more reliable, and the integrated circuit "
     "multiplied those gains. Personal computers arrived in the late nineteen seventies, and the "
     "internet connected them in the nineties. "),
    ("Gardening in a small city apartment can be surprisingly rewarding. A sunny balcony is enough "
     "for herbs like basil, thyme and rosemary, and even tomatoes or peppers will grow in deep pots "
     "if they receive six hours of light. Use a light potting mix rather than garden soil, water "
     "deeply but not too often, and feed the plants with a diluted fertilizer every two weeks during "
     "the growing season. Indoors, a south-facing window or an inexpensive LED grow light lets you "
     "keep greens going through the winter. "),
    ("Machine learning models for text usually start by splitting a sentence into tokens. A "
     "WordPiece tokenizer looks up each word in a fixed vocabulary and, when the whole word is "
     "missing, breaks it into smaller pieces that are present, marking continuation pieces with two "
     "hash signs. The token ids are then mapped to learned vectors, position information is added, "
     "and a stack of transformer layers mixes the information across the sequence with self "
     "attention. For sentence embeddings, the final hidden states are averaged over the real tokens "
     "and normalized to unit length. "),
]


def long_texts():
    out = []
    # ~300, ~600, ~1200, ~2500 words: past 256 tokens, past 512, and far past.
    reps = [(0, 3), (1, 5), (2, 8), (0, 20)]
    for i, (b, r) in enumerate(reps):
        out.append((f"long-{i}", " ".join([LONG_BASE[b]] * r).strip()))
    # one that mixes all three paragraphs, just over 256 tokens
    out.append(("long-4", " ".join(LONG_BASE).strip() + " " + LONG_BASE[0].strip()))
    # numbered sentences: every position has distinct content, so a wrong truncation point shows
    out.append(("long-5", " ".join(f"Sentence number {n} talks about item {n * 7 % 31}." for n in range(1, 121))))
    # long CJK text (one token per character): far past 256 tokens
    out.append(("long-6", "机器学习是人工智能的一个分支，它使计算机能够从数据中学习。" * 30))
    # long text of many distinct words, to test truncation near exactly 256 word pieces
    words = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta"]
    out.append(("long-7", " ".join(words[i % 8] for i in range(254))))  # 254 words -> 256 with CLS/SEP
    out.append(("long-8", " ".join(words[i % 8] for i in range(255))))  # 255 -> truncated by one
    out.append(("long-9", " ".join(words[i % 8] for i in range(253))))  # 253 -> 255 tokens
    return out


WHITESPACE = [
    ("empty-0", "empty", ""),
    ("ws-0", "whitespace", " "),
    ("ws-1", "whitespace", "   "),
    ("ws-2", "whitespace", "\t"),
    ("ws-3", "whitespace", "\n"),
    ("ws-4", "whitespace", " \t\n\r\n\t "),
    ("ws-5", "whitespace", "\u00a0\u2003\u3000"),  # no-break space, em space, ideographic space
    ("wsr-0", "whitespace_runs", "hello     world"),
    ("wsr-1", "whitespace_runs", "hello\t\t\tworld"),
    ("wsr-2", "whitespace_runs", "hello\n\n\nworld"),
    ("wsr-3", "whitespace_runs", "   leading and trailing spaces   "),
    ("wsr-4", "whitespace_runs", "line one\r\nline two\r\nline three"),
    ("wsr-5", "whitespace_runs", "\tIt is raining heavily\n outside   today.  "),
    ("wsr-6", "whitespace_runs", "tabs\tbetween\tevery\tword\tin\tthis\tsentence"),
    ("wsr-7", "whitespace_runs", "a\u00a0non-breaking\u00a0space and an\u2009thin space"),
]

ACCENTS = [
    "Café au lait, crème brûlée et pâté: très délicieux!",
    "Le garçon a mangé une pomme à Noël.",
    "Über den Wolken muss die Freiheit wohl grenzenlos sein.",
    "Straße, Mädchen, Jürgen und Größe.",
    "El niño pidió una piña en la montaña.",
    "São Paulo é a maior cidade do Brasil.",
    "Dvořák, Łódź, Kraków and Ærøskøbing.",
    "naïve résumé façade coöperate jalapeño",
    "Ångström, Øresund, Þórsmörk",
    "decomposed: Cafe\u0301 nai\u0308ve",  # combining accents (NFD)
]

CJK = [
    ("cjk-zh-0", "今天天气很好，我们去公园散步吧。"),
    ("cjk-zh-1", "机器学习是人工智能的一个重要分支。"),
    ("cjk-zh-2", "我喜欢吃北京烤鸭。"),
    ("cjk-zh-3", "繁體中文：臺灣的夜市很熱鬧。"),
    ("cjk-ja-0", "東京は日本の首都です。"),
    ("cjk-ja-1", "ひらがなとカタカナとかんじ。"),
    ("cjk-ja-2", "今日はとても暑いですね。アイスクリームを食べましょう。"),
    ("cjk-ja-3", "ｶﾀｶﾅ ﾊﾝｶｸ と ＦＵＬＬＷＩＤＴＨ ＡＢＣ １２３"),  # half-width kana, full-width Latin
    ("cjk-ko-0", "안녕하세요, 만나서 반갑습니다."),
    ("cjk-ko-1", "서울은 한국의 수도입니다."),
    ("cjk-mix-0", "The word 猫 means cat, and ねこ is its reading; 고양이 is Korean."),
    ("cjk-mix-1", "我在Google工作，用Python写code。"),
]

EMOJI = [
    "I love pizza 🍕🍕🍕",
    "😀😃😄😁😆😅😂🤣",
    "Family: 👨‍👩‍👧‍👦 and couple 👩‍❤️‍👨",
    "Thumbs up 👍🏽👍🏿 with skin tones",
    "Flags: 🇺🇸 🇯🇵 🇫🇷 🇧🇷",
    "Rainbow flag 🏳️‍🌈 and pirate flag 🏴‍☠️",
    "heart ❤️ vs heart ❤ (variation selector)",
    "Keycap 1️⃣ 2️⃣ #️⃣",
    "🚀",
    "Weather today: ☀️🌧️⛈️🌈",
    "Math ∑∫√∞ ≠ ≈ and arrows → ⇒ ↔",
    "♠♣♥♦ ★☆ ✓✗",
]

RTL = [
    ("rtl-ar-0", "مرحبا بالعالم"),
    ("rtl-ar-1", "اللغة العربية جميلة جدا."),
    ("rtl-he-0", "שלום עולם"),
    ("rtl-he-1", "הספר נמצא על השולחן."),
    ("rtl-fa-0", "امروز هوا خیلی خوب است."),
    ("rtl-mix-0", "The word שלום means peace, and سلام does too."),
    ("rtl-mix-1", "\u202eRight-to-left override\u202c then normal"),
]

OTHER_SCRIPT = [
    ("os-ru-0", "Москва — столица России."),
    ("os-el-0", "Η Αθήνα είναι η πρωτεύουσα της Ελλάδας."),
    ("os-hi-0", "भारत एक विशाल देश है।"),
    ("os-th-0", "ภาษาไทยไม่มีช่องว่างระหว่างคำ"),
    ("os-ka-0", "საქართველო ლამაზი ქვეყანაა."),
    ("os-am-0", "ሰላም ለዓለም"),  # Ethiopic: mostly [UNK]
]

CODE = [
    "def add(a, b):\n    return a + b\n",
    "for (int i = 0; i < n; ++i) { sum += x[i] * y[i]; }",
    "SELECT name, COUNT(*) FROM users WHERE age > 30 GROUP BY name ORDER BY 2 DESC;",
    "fn main() { println!(\"Hello, {}!\", name); }",
    "<div class=\"container\"><p>Hello &amp; welcome</p></div>",
    "{\"key\": [1, 2, 3], \"nested\": {\"a\": null, \"b\": true}}",
    "git commit -m 'fix: handle empty input' && git push origin main",
    "x = lambda *args, **kwargs: (args, kwargs)  # comment",
    "import numpy as np\narr = np.zeros((3, 4), dtype=np.float32)\nprint(arr.shape)",
    "defmodule Foo do\n  def bar(x) when is_integer(x), do: x * 2\nend",
    "https://example.com/path/to/page?query=value&other=123#section",
    "user.name+tag@example.co.uk",
]

NUMBERS = [
    "3.14159265358979323846264338327950288419716939937510",
    "1,234,567.89 and 1.234.567,89 and 1 234 567",
    "2024-01-15T13:45:30.123Z",
    "+1 (555) 123-4567",
    "!!!???...,,,;;;:::",
    "-----====+++++*****/////",
    "((([[[{{{<<<>>>}}}]]])))",
    "$100 €50 £30 ¥1000 ₹500 ₩10000",
    "100% 50‰ 3/4 ½ ¼ ¾",
    "0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20",
    "1e-12 6.022e23 0xDEADBEEF 0b1010 0o777",
    "…—–‘’“”«»„",
]

LONG_WORDS = [
    ("lw-0", "Pneumonoultramicroscopicsilicovolcanoconiosis"),
    ("lw-1", "a" * 100),  # WordPiece max_input_chars_per_word is 100: exactly at the limit
    ("lw-2", "b" * 101),  # one past the limit -> [UNK]
    ("lw-3", "supercalifragilisticexpialidocious" * 8),  # 272 chars -> [UNK]
    ("lw-4", "Donaudampfschifffahrtselektrizitätenhauptbetriebswerkbauunterbeamtengesellschaft"),
    ("lw-5", "abcdefghij" * 9 + "abcdefghi"),  # 99 chars: split into many word pieces
    ("lw-6", "x" * 1000),
    ("lw-7", "thequickbrownfoxjumpsoverthelazydog" * 2),  # 70 chars of joined words
]

MIXED_CASE = [
    ("mc-0", "The Quick Brown Fox"),
    ("mc-1", "the quick brown fox"),
    ("mc-2", "THE QUICK BROWN FOX"),
    ("mc-3", "tHe QuIcK bRoWn FoX"),
    ("mc-4", "It Is Raining Heavily Outside Today."),
    ("mc-5", "IT IS RAINING HEAVILY OUTSIDE TODAY."),
    ("mc-6", "iPhone, eBay, McDonald's, NASA, macOS"),
    ("mc-7", "ÉCOLE ÉLÉMENTAIRE À PARIS"),
    ("mc-8", "école élémentaire à paris"),
]

CONTROL = [
    ("ctl-0", "zero\u200bwidth\u200bspace"),
    ("ctl-1", "soft\u00adhyphen"),
    ("ctl-2", "bell\u0007and\u0000null"),
    ("ctl-3", "byte order mark \ufeff here"),
    ("ctl-4", "replacement char \ufffd and private use \ue000"),
    ("ctl-5", "word\u200djoiner\u2060test"),
    ("ctl-6", "\u0301 a lone combining accent"),
    ("ctl-7", "math 𝐀𝐁𝐂 𝒳 and ﬁ ligature"),  # astral plane letters, ligature
]


def generated_sentences():
    """Deterministic extra short sentences from templates (seeded)."""
    rng = random.Random(20240611)
    subjects = ["The engineer", "A child", "My neighbour", "The teacher", "An old man", "The pilot",
                "Our manager", "The farmer"]
    verbs = ["painted", "repaired", "sold", "found", "lost", "borrowed", "described", "photographed"]
    objects = ["a blue bicycle", "the wooden fence", "an antique clock", "the broken radio",
               "a small boat", "the kitchen table", "a silver ring", "the garden gate"]
    places = ["in the village", "near the river", "at the market", "after lunch", "on Tuesday",
              "before sunset", "in the garage", "during the storm"]
    out = []
    for i in range(24):
        out.append(f"{rng.choice(subjects)} {rng.choice(verbs)} {rng.choice(objects)} {rng.choice(places)}.")
    return out


def corpus():
    rows = []
    for topic, sents in CLUSTERS.items():
        for k, s in enumerate(sents):
            rows.append({"id": f"para-{topic}-{k}", "kind": "paraphrase", "text": s})
    for i, s in enumerate(SHORT):
        rows.append({"id": f"short-{i}", "kind": "short", "text": s})
    for i, s in enumerate(generated_sentences()):
        rows.append({"id": f"gen-{i}", "kind": "short", "text": s})
    for id_, s in long_texts():
        rows.append({"id": id_, "kind": "long", "text": s})
    for id_, kind, s in WHITESPACE:
        rows.append({"id": id_, "kind": kind, "text": s})
    for i, s in enumerate(ACCENTS):
        rows.append({"id": f"acc-{i}", "kind": "accents", "text": s})
    for id_, s in CJK:
        rows.append({"id": id_, "kind": "cjk", "text": s})
    for i, s in enumerate(EMOJI):
        rows.append({"id": f"emoji-{i}", "kind": "emoji", "text": s})
    for id_, s in RTL:
        rows.append({"id": id_, "kind": "rtl", "text": s})
    for id_, s in OTHER_SCRIPT:
        rows.append({"id": id_, "kind": "other_script", "text": s})
    for i, s in enumerate(CODE):
        rows.append({"id": f"code-{i}", "kind": "code", "text": s})
    for i, s in enumerate(NUMBERS):
        rows.append({"id": f"num-{i}", "kind": "numbers", "text": s})
    for id_, s in LONG_WORDS:
        rows.append({"id": id_, "kind": "long_word", "text": s})
    for id_, s in MIXED_CASE:
        rows.append({"id": id_, "kind": "mixed_case", "text": s})
    for id_, s in CONTROL:
        rows.append({"id": id_, "kind": "control", "text": s})
    ids = [r["id"] for r in rows]
    assert len(ids) == len(set(ids)), "duplicate ids"
    return rows


def main():
    rows = corpus()
    path = os.path.join(HERE, "corpus.jsonl")
    with open(path, "w", encoding="utf-8", newline="\n") as f:
        for r in rows:
            f.write(json.dumps(r, ensure_ascii=False) + "\n")
    kinds = {}
    for r in rows:
        kinds[r["kind"]] = kinds.get(r["kind"], 0) + 1
    print(f"wrote {path}: {len(rows)} inputs; " + ", ".join(f"{k} {v}" for k, v in kinds.items()))


if __name__ == "__main__":
    main()
