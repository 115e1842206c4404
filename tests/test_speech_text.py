"""Cleaning model output for speech (agent.speech.text)."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agent.speech.text import clean_for_speech


def _cases(*rows: tuple[str, str, str]) -> list:
    return [pytest.param(text, want, id=name) for name, text, want in rows]


MARKDOWN = _cases(
    ("header", "# Weather\nIt is sunny.", "Weather. It is sunny."),
    ("header-closing-hashes", "## Plan ##\nWave.", "Plan. Wave."),
    (
        "bold-italic",
        "It is **very** *warm* and __bright__ and _calm_ ***today***.",
        "It is very warm and bright and calm today.",
    ),
    ("strike", "I ~~can't~~ can wave.", "I can't can wave."),
    ("bullets", "Options:\n- wave\n* nod\n+ dance\n• bow", "Options: wave. nod. dance. bow."),
    ("numbered", "Steps:\n1. Turn left\n2) Wave", "Steps: Turn left. Wave."),
    ("task-list", "- [ ] charge\n- [x] wave", "charge. wave."),
    ("quote-and-rule", "> quoted text\n\n---\n\nAfter the rule", "quoted text. After the rule."),
    (
        "table",
        "| Day | Weather |\n|:---|---:|\n| Mon | rain |\n| Tue | sun |",
        "Day, Weather. Mon, rain. Tue, sun.",
    ),
    ("link-keeps-text", 'See [the manual](https://example.com/manual "title") now.', "See the manual now."),
    ("reference-link", "Read [the guide][1].\n\n[1]: https://example.com", "Read the guide."),
    ("image-dropped", "Look ![a robot](robot.png) here.", "Look here."),
    ("html-tags", "Hello<br>world <b>bold</b>.", "Hello world bold."),
    ("snake-case", "Call snake_case_name now.", "Call snake case name now."),
    ("lines-without-punctuation", "Sure\nI will wave now", "Sure. I will wave now."),
)

EMOJI = _cases(
    ("emoji", "Great job 👍🎉! I love it ❤️", "Great job! I love it."),
    ("zwj-family-and-flag", "My family 👨‍👩‍👧 and flag 🇺🇸 here.", "My family and flag here."),
    ("skin-tone", "Wave 👋🏽 hello.", "Wave hello."),
    ("dingbats-arrows", "Done ✅ ✓ → next ★ step.", "Done next step."),
    ("keycap", "Press 1️⃣ now.", "Press one now."),
    ("trademark", "Bolt™ and Piper®.", "Bolt and Piper."),
)

LINKS = _cases(
    ("url", "Visit https://example.com/a_b?x=1 today.", "Visit a link today."),
    ("url-end-of-sentence", "Go to http://example.org/x.", "Go to a link."),
    ("www", "See www.example.org, please.", "See a link, please."),
    ("bare-domain", "Check out example.com for more.", "Check out a link for more."),
    ("autolink", "Docs: <https://docs.example.com/x>.", "Docs: a link."),
    ("email", "Write to bob.smith@example.co.uk today.", "Write to an email address today."),
)

CODE = _cases(
    ("fenced", "Run this:\n```python\nprint('hi')\n```\nThen wait.", "Run this: Then wait."),
    ("fenced-tilde", "Here:\n~~~\nls -la\n~~~\nDone.", "Here: Done."),
    ("unclosed-fence", "Try:\n```bash\nrm -rf /tmp/x\nmore code", "Try:"),
    ("inline", "Use `ls -la` to list files.", "Use to list files."),
)

MARKUP = _cases(
    ("gemma-tool-call", 'Sure!<|tool_call>call:wave{side:<|"|>right<|"|>}<tool_call|> Done.', "Sure! Done."),
    ("xml-tool-call", '<tool_call>{"name": "wave", "arguments": {}}</tool_call>Waving now.', "Waving now."),
    ("gemma-tool-response", "<|tool_response>response:wave{ok:true}<tool_response|>I waved.", "I waved."),
    ("xml-tool-response", '<tool_response>{"ok": true}</tool_response>It worked.', "It worked."),
    ("tool-declaration", "<|tool>declaration:wave{}<tool|>Hi.", "Hi."),
    ("unclosed-tool-call", "Okay. <|tool_call>call:wave{side:", "Okay."),
    ("think", "<think>The user wants a wave.</think>Okay, waving!", "Okay, waving!"),
    ("think-multiline", "<think>\nstep 1\nstep 2\n</think>\n\nHello.", "Hello."),
    ("gemma-thought-channel", "<|channel>thought\nLet me think.<channel|>Here you go.", "Here you go."),
    ("unclosed-think", "Hello there. <think>this is cut off and never", "Hello there."),
    ("unclosed-channel", "Hi. <|channel>thought\nmaybe I should", "Hi."),
    ("closer-without-opener", "the user wants a wave so I wave</think>Waving!", "Waving!"),
    ("channel-closer-without-opener", "thought\nstuff<channel|>Done thinking.", "Done thinking."),
    ("two-think-blocks", "<think>a</think>One. <think>b</think>Two.", "One. Two."),
    ("turn-tokens", "<|turn>model\nHi there!<turn|><eos>", "Hi there!"),
    ("im-tokens", "<|im_start|>assistant\nHello<|im_end|>", "Hello."),
    ("think-flag-and-quote-token", '<|think|>Say <|"|>yes<|"|> now.', "Say yes now."),
    ("eos-bos", "<bos>Fine.<eos></s>", "Fine."),
)

NUMBERS = _cases(
    ("time-pm", "It is 3:30 pm.", "It is three thirty p m."),
    ("time-am-dots", "Meet at 7:15 a.m. Then rest.", "Meet at seven fifteen a m. Then rest."),
    ("time-24h", "The bus leaves at 14:05.", "The bus leaves at fourteen oh five."),
    ("time-24h-hundred", "At 18:00 we eat.", "At eighteen hundred we eat."),
    ("time-oclock", "At 9:00 we start.", "At nine o'clock we start."),
    ("time-hour-ampm", "Wake me at 10am or 6 PM.", "Wake me at ten a m or six p m."),
    ("time-oh-minutes", "It is 3:05 pm.", "It is three oh five p m."),
    ("dollars-cents", "It costs $4.50.", "It costs four dollars and fifty cents."),
    ("euros", "That is €3.", "That is three euros."),
    ("one-dollar", "Only $1!", "Only one dollar!"),
    ("cents-only", "Just $0.99.", "Just ninety-nine cents."),
    ("pounds-pence", "Pay £2.01.", "Pay two pounds and one penny."),
    ("currency-scale", "Worth $3.5 million.", "Worth three point five million dollars."),
    ("currency-suffix", "It is 5€ or 10 EUR.", "It is five euros or ten euros."),
    ("thousands-separator", "It costs $1,250.", "It costs one thousand, two hundred and fifty dollars."),
    ("percent", "Battery at 25%.", "Battery at twenty-five percent."),
    ("negative-decimal-percent", "Down -3.5%.", "Down minus three point five percent."),
    ("negative-decimal", "It is -3.5 outside.", "It is minus three point five outside."),
    ("decimal", "Pi is about 3.14.", "Pi is about three point one four."),
    ("ordinals", "1st, 2nd, 3rd, 21st and 100th.", "first, second, third, twenty-first and one hundredth."),
    (
        "year-in",
        "In 2024 we built 2024 robots.",
        "In twenty twenty-four we built two thousand and twenty-four robots.",
    ),
    ("month-day-year", "Born March 5, 2024.", "Born March fifth, twenty twenty-four."),
    ("day-month", "On 5 May we met.", "On fifth of May we met."),
    ("decades", "The 1990s and the 80s.", "The nineteen nineties and the eighties."),
    ("year-bc", "Built in 1200 AD.", "Built in twelve hundred AD."),
    ("millions", "About 1,000,000 people.", "About one million people."),
    ("range", "Wait 3-5 minutes.", "Wait three to five minutes."),
    ("leading-zeros", "Agent 007.", "Agent zero zero seven."),
    ("hash-number", "I am your #1 fan.", "I am your number one fan."),
    (
        "degrees",
        "It is 25°C, or 77°F, and 10° here.",
        "It is twenty-five degrees Celsius, or seventy-seven degrees Fahrenheit, and ten degrees here.",
    ),
    (
        "units",
        "Go 5 km at 30 km/h, carry 1 kg.",
        "Go five kilometers at thirty kilometers per hour, carry one kilogram.",
    ),
    ("plain-integer", "I see 2 people and 15 chairs.", "I see two people and fifteen chairs."),
    ("number-glued-to-letters", "It is 2.5x faster.", "It is two point five x faster."),
    (
        "currency-short-scales",
        "$5bn and $2M and $3k.",
        "five billion dollars and two million dollars and three thousand dollars.",
    ),
    ("iso-date", "Due 2024-05-01.", "Due May first, twenty twenty-four."),
    ("phone", "Call 555-1234.", "Call five five five, one two three four."),
    ("year-between", "Between 2020 and 2030.", "Between twenty twenty and two thousand and thirty."),
)

TIDY = _cases(
    ("ampersand-and-punctuation", "Tom & Jerry... wow!!! Really?!", "Tom and Jerry. wow! Really?"),
    ("whitespace", "  Hello \n\n   there\t\tfriend  ", "Hello. there friend."),
    ("invisible-characters", "Hello\u200bworld, co\u00adoperate.", "Hello world, cooperate."),
    (
        "mixed-reply",
        "<think>plan</think>## Sure! 🤖\n\n- I'll **wave** at 3:30 pm 👋\n- Cost: $4.50",
        "Sure! I'll wave at three thirty p m. Cost: four dollars and fifty cents.",
    ),
)

UNSPEAKABLE = [
    "",
    "   ",
    "\n\n",
    "🤖👋🎉",
    "**  **",
    "---",
    "<think>only thinking</think>",
    "```\ncode only\n```",
    '<|tool_call>call:wave{side:<|"|>left<|"|>}<tool_call|>',
    "<turn|><eos>",
    "| --- | --- |",
    "...!?",
]


@pytest.mark.parametrize(("text", "want"), MARKDOWN)
def test_markdown(text: str, want: str) -> None:
    assert clean_for_speech(text) == want


@pytest.mark.parametrize(("text", "want"), EMOJI)
def test_emoji_and_symbols(text: str, want: str) -> None:
    assert clean_for_speech(text) == want


@pytest.mark.parametrize(("text", "want"), LINKS)
def test_urls_and_emails(text: str, want: str) -> None:
    assert clean_for_speech(text) == want


@pytest.mark.parametrize(("text", "want"), CODE)
def test_code(text: str, want: str) -> None:
    assert clean_for_speech(text) == want


@pytest.mark.parametrize(("text", "want"), MARKUP)
def test_tool_and_thinking_markup(text: str, want: str) -> None:
    assert clean_for_speech(text) == want


@pytest.mark.parametrize(("text", "want"), NUMBERS)
def test_numbers(text: str, want: str) -> None:
    assert clean_for_speech(text) == want


@pytest.mark.parametrize(("text", "want"), TIDY)
def test_tidy(text: str, want: str) -> None:
    assert clean_for_speech(text) == want


@pytest.mark.parametrize("text", UNSPEAKABLE)
def test_nothing_speakable_gives_empty_string(text: str) -> None:
    assert clean_for_speech(text) == ""


_MARKUP_CHARS = re.compile(r"[<>*#`|\[\]{}_~]")


_PIECES = list("ab1 2:.,-$%#*_`|<>[]()!?\n😀é") + [
    "<think>",
    "</think>",
    "<|tool_call>",
    "<tool_call|>",
    "<|channel>",
    "<channel|>",
    "<eos>",
    "https://x.io ",
    "**",
    "```",
    "3:30 pm",
    "$4.50",
    " 25% ",
    "[a](b)",
    "# ",
    "- ",
]


@settings(max_examples=150, deadline=None)
@given(st.lists(st.sampled_from(_PIECES), max_size=40).map("".join))
def test_clean_never_fails_and_leaves_no_markup(text: str) -> None:
    out = clean_for_speech(text)
    assert out == out.strip() and "  " not in out and "\n" not in out
    assert not _MARKUP_CHARS.search(out)
    assert out == "" or any(ch.isalnum() for ch in out)
