"""The conformance suite's cases: what a capable model decides where the stand-in's rules decide otherwise.

Each case is a conversation: the user's words and, round by round, what a capable model writes
(:mod:`scripted_model`). On the plain path the product must run exactly those calls (within their
schema's clamps, a clamp said aloud), say those words, and send each engine its own protocol.
For every case but the product-rule ones, :func:`stand_in_differences` shows that the small-model
profile's rules would have done something else with the same model output: rewritten an
argument, refused a call, withheld a tool, cut or replaced the words, or ended the turn early.
"""

from __future__ import annotations

from typing import Any

from scripted_model import Case, Step, Turn, call

from agent.config import LLMConfig
from agent.conversation.policy import TurnStart
from agent.conversation.records import TurnResult
from agent.conversation.rounds import RoundPlan
from agent.conversation.small import SmallPolicy
from agent.conversation.small.readback import tail_after_data
from agent.skills import SkillContext, SkillRegistry

POTION = ["red herb", "spring water"]
SWORD = ["iron bar", "leather strip"]
BREAD = ["flour", "water"]


def _t(said: str, *steps: Step, hears: tuple[str, ...] = ()) -> Turn:
    return Turn(said, steps, hears)


CASES: list[Case] = [
    # --- counts ---------------------------------------------------------------------------------
    Case(
        "a nod or two",
        "counts",
        (_t("Give me a nod or two.", Step(calls=(call("nod", times=2),)), Step("There you go.")),),
    ),
    Case(
        "as many as it likes",
        "counts",
        (
            _t(
                "Nod as many times as you like.",
                Step("Happily!", (call("nod", times=4),)),
                Step("That was four.", sees="4 times"),
            ),
        ),
    ),
    Case(
        "nod, then once more",
        "counts",
        (_t("Nod your head, then nod once more.", Step(calls=(call("nod", times=2),)), Step("Two nods.")),),
    ),
    Case(
        "a bunch of waves",
        "counts",
        (
            _t(
                "Wave at them a bunch.",
                Step("Hello everyone!", (call("wave", times=4),)),
                Step("Four waves."),
            ),
        ),
    ),
    Case(
        "zero nods",
        "counts",
        (
            _t(
                "Nod zero times.",
                Step(calls=(call("nod", times=0),)),
                Step("There."),
                hears=("I nod at least once.",),
            ),
        ),
    ),
    # --- durations ------------------------------------------------------------------------------
    Case(
        "a pomodoro",
        "durations",
        (
            _t(
                "Set a timer for the length of a pomodoro.",
                Step(
                    "A 25 minute pomodoro timer, starting now.",
                    (call("set_timer", seconds=1500, label="pomodoro"),),
                ),
                hears=("25-minute pomodoro timer.",),
            ),
        ),
    ),
    Case(
        "the usual steeping time",
        "durations",
        (
            _t(
                "Start a timer, my tea needs steeping for the usual time.",
                Step("Four minutes for your tea.", (call("set_timer", seconds=240, label="tea"),)),
                hears=("4-minute tea timer.",),
            ),
        ),
    ),
    Case(
        "ten minutes, then remind",
        "durations",
        (
            _t(
                "Give me ten minutes, then remind me.",
                Step(calls=(call("set_timer", seconds=600, label="reminder"),)),
                hears=("10-minute reminder timer.",),
            ),
        ),
    ),
    Case(
        "bread in fifteen more minutes",
        "durations",
        (
            _t(
                "Remind me to take the bread out, it needs about fifteen more minutes.",
                Step(calls=(call("set_timer", seconds=900, label="bread"),)),
                hears=("15-minute bread timer.",),
            ),
        ),
    ),
    Case(
        "six and a half minutes",
        "durations",
        (
            _t(
                "Set an egg timer for six and a half minutes.",
                Step(calls=(call("set_timer", seconds=390, label="egg"),)),
                hears=("390-second egg timer.",),
            ),
        ),
    ),
    # --- sides ----------------------------------------------------------------------------------
    Case(
        "whichever hand",
        "sides",
        (
            _t(
                "Wave with whichever hand you like.",
                Step(calls=(call("wave", hand="left"),)),
                Step("Left it is!"),
            ),
        ),
    ),
    Case(
        "the writing hand",
        "sides",
        (
            _t(
                "Which hand do you write with? Wave it.",
                Step("My left, like this!", (call("wave", hand="left"),)),
                Step("Hi!"),
            ),
        ),
    ),
    Case(
        "Sam on the left",
        "sides",
        (_t("Wave to Sam, he is on your left.", Step(calls=(call("wave", hand="left"),)), Step("Hi Sam!")),),
    ),
    # --- angles ---------------------------------------------------------------------------------
    Case(
        "slightly left",
        "angles",
        (_t("Look slightly to the left.", Step(calls=(call("look", yaw_deg=10),)), Step("Like this?")),),
    ),
    Case(
        "a tiny bit left",
        "angles",
        (
            _t(
                "Look towards the window on your left, just a tiny bit.",
                Step(calls=(call("look", yaw_deg=5),)),
                Step("A little peek."),
            ),
        ),
    ),
    Case(
        "a teeny bit right",
        "angles",
        (_t("Peek to your right a teeny bit.", Step(calls=(call("look", yaw_deg=-6),)), Step("Peeking.")),),
    ),
    Case(
        "right in front",
        "angles",
        (
            _t(
                "Look at me, I'm right in front of you.",
                Step(calls=(call("look", yaw_deg=0, pitch_deg=0),)),
                Step("I see you."),
            ),
        ),
    ),
    # --- negation words that ask for it -----------------------------------------------------------
    Case(
        "why don't you dance",
        "negations",
        (_t("Why don't you dance for us?", Step("Gladly!", (call("dance"),)), Step("Ta-da!")),),
    ),
    Case(
        "why not wave",
        "negations",
        (_t("Why not wave to everyone?", Step(calls=(call("wave"),)), Step("Hello everyone!")),),
    ),
    Case(
        "never dance for me",
        "negations",
        (
            _t(
                "You never dance for me. Go on, dance!",
                Step("Here I go!", (call("dance"),)),
                Step("How was that?"),
            ),
        ),
    ),
    Case(
        "don't forget to nod",
        "negations",
        (
            _t(
                "Don't forget to nod when you agree. Do you agree?",
                Step("I do.", (call("nod"),)),
                Step("Agreed."),
            ),
        ),
    ),
    # --- tools the words seem to point elsewhere ---------------------------------------------------
    Case(
        "show how it celebrates",
        "choice",
        (_t("Show me how you celebrate.", Step(calls=(call("dance"),)), Step("Party time!")),),
    ),
    Case(
        "look happy",
        "choice",
        (_t("Look happy for me!", Step(calls=(call("dance"),)), Step("Happy dance!")),),
    ),
    Case(
        "let me see you celebrate",
        "choice",
        (_t("Let me see you celebrate the goal!", Step("Goal!", (call("dance"),)), Step("What a goal!")),),
    ),
    # --- reading data back ------------------------------------------------------------------------
    Case(
        "time and a reminder",
        "data",
        (
            _t(
                "What time is it?",
                Step(calls=(call("get_time"),)),
                Step("{result} Shall I set a reminder?", sees="It is"),
            ),
        ),
    ),
    Case(
        "time for a train",
        "data",
        (
            _t(
                "What's the time? I have a train to catch.",
                Step(calls=(call("get_time"),)),
                Step("{result} Hurry, your train won't wait!", sees="It is"),
            ),
        ),
    ),
    Case(
        "morning or afternoon",
        "data",
        (
            _t(
                "Is it morning or afternoon?",
                Step(calls=(call("get_time"),)),
                Step("I just checked the clock for you.", sees="It is"),
            ),
        ),
    ),
    # --- no call ----------------------------------------------------------------------------------
    Case(
        "the job", "no call", (_t("I got the job!", Step("Congratulations! I'm dancing with joy for you.")),)
    ),
    Case(
        "its morning",
        "no call",
        (_t("Tell me about your morning.", Step("I'm spinning ideas all morning, thanks for asking.")),),
    ),
    Case(
        "moving to Paris",
        "no call",
        (_t("I'm moving to Paris next week.", Step("How exciting! I'm nodding along with a big smile.")),),
    ),
    # --- a question back --------------------------------------------------------------------------
    Case(
        "eggs: how long?",
        "question",
        (
            _t("Set a timer for my eggs.", Step("How long should they boil?")),
            _t(
                "Six minutes.",
                Step("Six minutes for the eggs.", (call("set_timer", seconds=360, label="eggs"),)),
                hears=("6-minute eggs timer.",),
            ),
        ),
    ),
    Case(
        "which hand?",
        "question",
        (
            _t("Wave with one hand.", Step("Left or right?")),
            _t("Whichever you like.", Step(calls=(call("wave", hand="left"),)), Step("Waving with my left.")),
        ),
    ),
    Case(
        "which way?",
        "question",
        (
            _t("Turn your head.", Step("Which way?")),
            _t(
                "Away from the door, the door is on the right.",
                Step(calls=(call("look", yaw_deg=45),)),
                Step("Facing away from the door."),
            ),
        ),
    ),
    # --- a follow-up after data -------------------------------------------------------------------
    Case(
        "a sword's price, then one",
        "follow-up",
        (
            _t(
                "How much does an iron sword cost?",
                Step(calls=(call("lookup_recipe", item="iron sword"),)),
                Step("Ten coins, it takes an iron bar and a leather strip.", sees="leather strip"),
            ),
            _t(
                "Make me one, then.",
                Step(calls=(call("craft", item="iron sword", ingredients=SWORD),)),
                Step("Here's your sword.", sees="Crafted"),
            ),
        ),
    ),
    Case(
        "a potion's recipe, then two",
        "follow-up",
        (
            _t(
                "What goes into a health potion?",
                Step(calls=(call("lookup_recipe", item="health potion"),)),
                Step("A red herb and spring water.", sees="red herb"),
            ),
            _t(
                "Brew me a couple.",
                Step(calls=(call("craft", item="health potion", ingredients=POTION, quantity=2),)),
                Step("Two potions, still warm.", sees="Crafted 2"),
            ),
        ),
    ),
    # --- chains of dependent calls ------------------------------------------------------------------
    Case(
        "Ada's potion",
        "chain",
        (
            _t(
                "I paid for a health potion, can you make it? I'm Ada.",
                Step(calls=(call("check_payment", customer="Ada"),)),
                Step(calls=(call("lookup_recipe", item="health potion"),), sees="paid"),
                Step(calls=(call("craft", item="health potion", ingredients=POTION),), sees="red herb"),
                Step("Here you go, Ada, one health potion!", sees="Crafted"),
            ),
        ),
    ),
    Case(
        "Bo's bread",
        "chain",
        (
            _t(
                "Bake bread for Bo, he paid already.",
                Step(calls=(call("check_payment", customer="Bo"),)),
                Step(calls=(call("lookup_recipe", item="bread"),), sees="paid"),
                Step(calls=(call("craft", item="bread", ingredients=BREAD),), sees="flour"),
                Step("Fresh bread for Bo!", sees="Crafted"),
            ),
        ),
    ),
    Case(
        "two swords for Ada",
        "chain",
        (
            _t(
                "Ada wants two iron swords; check she paid, then craft them.",
                Step(calls=(call("check_payment", customer="Ada"),)),
                Step(calls=(call("lookup_recipe", item="iron sword"),), sees="coins"),
                Step(
                    calls=(call("craft", item="iron sword", ingredients=SWORD, quantity=2),), sees="iron bar"
                ),
                Step("Two iron swords for Ada.", sees="Crafted 2"),
            ),
        ),
    ),
    Case(
        "a potion handed over",
        "chain",
        (
            _t(
                "Cy paid, make a health potion and hand it over.",
                Step(
                    calls=(call("check_payment", customer="Cy"), call("lookup_recipe", item="health potion"))
                ),
                Step(calls=(call("craft", item="health potion", ingredients=POTION),), sees="spring water"),
                Step(calls=(call("hand_over", item="health potion", customer="Cy"),), sees="Crafted"),
                Step("Enjoy, Cy!", sees="Handed"),
            ),
        ),
    ),
    # --- an error, and a retry ----------------------------------------------------------------------
    Case(
        "a missing ingredient",
        "retry",
        (
            _t(
                "Craft a health potion from red herb.",
                Step(calls=(call("craft", item="health potion", ingredients=["red herb"]),)),
                Step(calls=(call("craft", item="health potion", ingredients=POTION),), sees="spring water"),
                Step("Done, with spring water added.", sees="Crafted"),
            ),
        ),
    ),
    Case(
        "bread from nothing",
        "retry",
        (
            _t(
                "Craft bread.",
                Step(calls=(call("craft", item="bread", ingredients=[]),)),
                Step(calls=(call("lookup_recipe", item="bread"),), sees="needs"),
                Step(calls=(call("craft", item="bread", ingredients=BREAD),), sees="flour"),
                Step("Bread's ready.", sees="Crafted"),
            ),
        ),
    ),
    Case(
        "a timer below zero",
        "retry",
        (
            _t(
                "Set a timer for minus five seconds.",
                Step(calls=(call("set_timer", seconds=-5),)),
                Step("A timer can't run backwards. Did you mean five seconds?", sees="greater than 0"),
            ),
        ),
    ),
    Case(
        "a wrong item name",
        "retry",
        (
            _t(
                "Make me a sword.",
                Step(calls=(call("craft", item="sword", ingredients=SWORD),)),
                Step(calls=(call("craft", item="iron sword", ingredients=SWORD),), sees="iron sword"),
                Step("One iron sword.", sees="Crafted"),
            ),
        ),
    ),
    # --- several calls in one round -------------------------------------------------------------------
    Case(
        "two waves and three nods",
        "several",
        (
            _t(
                "Wave twice and nod three times.",
                Step("Sure.", (call("wave", times=2), call("nod", times=3))),
                Step("Done."),
            ),
        ),
    ),
    Case(
        "timers of 3 and 6 seconds",
        "several",
        (
            _t(
                "Set timers for 3 seconds and 6 seconds.",
                Step(
                    "Two timers.",
                    (
                        call("set_timer", seconds=3, label="first"),
                        call("set_timer", seconds=6, label="second"),
                    ),
                ),
                hears=("3-second first timer.", "6-second timer."),
            ),
        ),
    ),
    Case(
        "nod and the time",
        "several",
        (
            _t(
                "Nod and tell me the time.",
                Step(calls=(call("nod"), call("get_time"))),
                Step("{result} Have a lovely day.", sees="It is"),
            ),
        ),
    ),
    Case(
        "look left and wave right",
        "several",
        (
            _t(
                "Look left and wave with your right hand.",
                Step("On it.", (call("look", yaw_deg=30), call("wave", hand="right"))),
                Step("Hello there!"),
            ),
        ),
    ),
    # --- the same again -------------------------------------------------------------------------------
    Case(
        "do that again",
        "again",
        (
            _t("Wave with your left hand, please.", Step(calls=(call("wave", hand="left"),)), Step("Hello!")),
            _t("Do that again.", Step("Again!", (call("wave", hand="left"),)), Step("There.")),
        ),
    ),
    Case(
        "what was said",
        "again",
        (
            _t("Tell me something nice.", Step("You have a kind voice.")),
            _t("What did you just say?", Step("I said you have a kind voice.")),
        ),
    ),
    Case(
        "one more time",
        "again",
        (
            _t("Nod for me.", Step(calls=(call("nod"),)), Step("Yes!")),
            _t("One more time!", Step(calls=(call("nod"),)), Step("Nodding again.")),
        ),
    ),
    # --- everyday things through the real skills (issue 50) -----------------------------------------
    Case(
        "a tea timer asked about, changed, cancelled",
        "everyday",
        (
            _t(
                "Put the kettle on a timer, twenty minutes, and call it tea.",
                Step(calls=(call("set_timer", seconds=1200, label="tea"),)),
                hears=("20-minute tea timer.",),
            ),
            _t(
                "How much longer on that one?",
                Step(calls=(call("timers_left", label="tea"),)),
                hears=("The tea timer has 20 minutes left.",),
            ),
            _t(
                "Make it a quarter of an hour.",
                Step(calls=(call("change_timer", seconds=900, label="tea"),)),
                hears=("The tea timer is now set for 15 minutes.",),
            ),
            _t(
                "Scrap the tea one.",
                Step(calls=(call("cancel_timer", label="tea"),)),
                hears=("I cancelled the tea timer for 15 minutes.",),
            ),
        ),
    ),
    Case(
        "pasta and sauce in one sentence",
        "everyday",
        (
            _t(
                "Pasta needs eight minutes and the sauce twenty, time both.",
                Step(
                    calls=(
                        call("set_timer", seconds=480, label="pasta"),
                        call("set_timer", seconds=1200, label="sauce"),
                    )
                ),
                hears=("8-minute pasta timer.", "20-minute sauce timer."),
            ),
            _t(
                "Forget about the sauce, I took it off.",
                Step(calls=(call("cancel_timer", label="sauce"),)),
                hears=("I cancelled the sauce timer for 20 minutes.",),
            ),
        ),
    ),
    Case(
        "Tokyo, then next Friday",
        "everyday",
        (
            _t(
                "My sister lives in Tokyo. Is she still awake?",
                Step(calls=(call("get_time", place="Tokyo"),)),
                Step("{result} Check the clock before you call her.", sees="In Tokyo it is"),
            ),
            _t(
                "She lands here next Friday, which date is that?",
                Step(calls=(call("get_date", day="next Friday"),)),
                Step("{result} I hope she has a good flight.", sees="Next Friday is"),
            ),
        ),
    ),
    Case(
        "a name and a fact, recalled",
        "everyday",
        (
            _t(
                "Hi, I'm Priya, and I take my coffee black.",
                Step(
                    calls=(
                        call("remember", fact="my name is Priya"),
                        call("remember", fact="I take my coffee black"),
                    )
                ),
                hears=("Nice to meet you, Priya.", "Okay, I will remember that you take your coffee black."),
            ),
            _t(
                "What have you got on me so far?",
                Step(calls=(call("recall"),)),
                hears=("You told me that your name is Priya and you take your coffee black.",),
            ),
            _t(
                "And what should I call you?",
                Step(calls=(call("own_name"),)),
                hears=("My name is Bolt.",),
            ),
        ),
    ),
    Case(
        "a look again, as it was",
        "again",
        (
            _t(
                "Look up at the shelf on your right.",
                Step(calls=(call("look", yaw_deg=-35, pitch_deg=20),)),
                Step("Up on the shelf."),
            ),
            _t(
                "Do it again, please.",
                Step(calls=(call("look", yaw_deg=-35, pitch_deg=20),)),
                Step("Once more."),
            ),
        ),
    ),
    # --- product rules (the same on every profile) ----------------------------------------------------
    Case(
        "ten nods",
        "product",
        (
            _t(
                "Nod ten times.",
                Step(calls=(call("nod", times=10),)),
                Step("Five it is."),
                hears=("I can nod at most 5 times in a row.",),
            ),
        ),
    ),
    Case(
        "a wave under the e-stop",
        "product",
        (
            _t(
                "Wave hello.",
                Step(calls=(call("wave"),)),
                Step("Sorry!"),
                hears=("My emergency stop is on, so I cannot move until a person clears it.",),
            ),
        ),
        estop=True,
    ),
    Case(
        "stop",
        "product",
        (_t("Stop!", Step(calls=(call("stop"),)), hears=("I stopped and I am holding still.",)),),
    ),
    Case(
        "look past the range",
        "product",
        (
            _t(
                "Look 90 degrees to the left.",
                Step(calls=(call("look", yaw_deg=90),)),
                Step("That's as far as I go."),
                hears=("I can turn my head at most 60 degrees to the left.",),
            ),
        ),
    ),
]
"""The cases, by kind."""

PRODUCT = "product"
"""Cases of product rules: the same on every profile, so the stand-in need not differ there."""


def stand_in_differences(
    case: Case, results: list[TurnResult], registry: SkillRegistry, ctx: SkillContext, cfg: LLMConfig
) -> list[str]:
    """What the small-model profile's rules would have done otherwise with the same model output.

    The rules run as they run the stand-in (grammar mode), turn by turn, on the calls the model
    wrote and the outcomes the plain run got (``results``, one per turn):

    * the turn answered by the rules themselves, without the model (:meth:`SmallRules.answer`);
    * a call its plan does not offer in that round (the tool prior withholds it);
    * the model's words in a movement's round replaced by an acknowledgement ("Sure!");
    * its arguments rewritten from the words (:meth:`SmallRules.fix`), or the call refused
      (:meth:`SmallRules.vet`);
    * the turn ended before a round the model still had (:meth:`SmallRules.next_round`);
    * words cut after the data they read back, or a sentence left out as a claimed movement;
    * words added after the rounds (:meth:`SmallRules.after`).

    Returns:
        One line per difference (empty: the rules would have done the same).
    """
    policy = SmallPolicy(registry, ctx, cfg, "grammar")
    out: list[str] = []
    history: list[dict[str, Any]] = []
    for turn, done in zip(case.turns, results, strict=True):
        rules = policy.begin(TurnStart(turn.said, list(history), (), True))
        direct = rules.answer()
        if direct is not None:
            out.append(f"{turn.said!r}: answered without the model: {direct}")
            history += [{"role": "user", "content": turn.said}, {"role": "assistant", "content": direct.say}]
            continue
        res, spoken = TurnResult(), []
        outcomes = iter(done.calls)
        for rnd, step in enumerate(turn.steps):
            plan = rules.plan(rnd, RoundPlan(rnd < cfg.max_tool_rounds - 1), res, spoken)
            first = len(res.calls)
            for c in step.calls:
                out += _call_differences(turn.said, rnd, c, plan, rules, registry)
                res.calls.append(next(outcomes))
            says, lines = _speech_differences(turn.said, step, plan, rules, registry, res)
            out += lines
            if says:
                spoken.append(says)
            if step.calls and rnd + 1 < len(turn.steps) and not rules.next_round(says, res, first, rnd, True):
                out.append(f"{turn.said!r}: the turn ends before the model's round {rnd + 1}")
                break
        added = rules.after(res, spoken, False)
        if added:
            out.append(f"{turn.said!r}: {added} said after the model")
        made = [{"function": {"name": n, "arguments": a}} for n, a, _ in res.calls]
        history += [
            {"role": "user", "content": turn.said},
            {"role": "assistant", "content": " ".join(spoken), "tool_calls": made},
        ]
    return out


def _call_differences(
    said: str, rnd: int, c: Any, plan: RoundPlan, rules: Any, registry: SkillRegistry
) -> list[str]:
    """How the small rules would treat one call the model wrote: withheld, rewritten or refused."""
    out = []
    skill = registry.skills.get(c.name)
    if not plan.allow_tools or c.name in plan.done:
        out.append(f"{said!r} round {rnd}: {c.name} is not offered")
    if skill is not None and rules.fix(skill, dict(c.args)) != c.args:
        out.append(f"{said!r}: {c.name}{c.args} becomes {rules.fix(skill, dict(c.args))}")
    vetted = rules.vet(skill, c.args) if skill is not None else None
    if vetted is not None:
        out.append(f"{said!r}: {c.name} is not run ({vetted.result})")
    return out


def _speech_differences(
    said: str, step: Step, plan: RoundPlan, rules: Any, registry: SkillRegistry, res: TurnResult
) -> tuple[str, list[str]]:
    """What the small rules would say of a round's words: ``(what is said, the differences)``.

    A movement's round says an acknowledgement instead of the model's words (grammar mode); a data
    round is cut after its data; a claimed movement with no call that worked is left out.
    """
    out = []
    skills = [registry.skills[c.name] for c in step.calls if c.name in registry.skills]
    ack = next((a for sk in skills if plan.ack is not None and (a := plan.ack(sk))), "")
    if ack and step.says:
        out.append(f"{said!r}: {step.says!r} becomes the acknowledgement {ack!r}")
    says = step.says or ack
    if "{result}" in says:
        says = says.replace("{result}", str(res.calls[-1][2].result))
    if (
        says
        and plan.copy_from
        and tail_after_data(says, list(plan.copy_from), rules.carried) not in ("", says)
    ):
        out.append(f"{said!r}: {says!r} is cut after its data")
    if says and any(_claims(s) for s in _sentences(says)) and not any(o.ok for _, _, o in res.calls):
        out.append(f"{said!r}: a sentence of {says!r} is left out as a claimed movement")
    return says, out


def _sentences(text: str) -> list[str]:
    from agent.speech.sentences import split_sentences

    return split_sentences(text)


def _claims(sentence: str) -> bool:
    from agent.conversation.small.claims import claims_motion

    return claims_motion(sentence)
