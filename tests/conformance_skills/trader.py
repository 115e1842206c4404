"""A trader's skills for the conformance suite: a chain of dependent calls (the launch post's trader NPC).

The model checks a payment, looks up what a thing takes, crafts it and hands it over; each call
needs the one before it (its result names what the next takes).
"""

from typing import Annotated, Literal

from pydantic import Field

from agent.skills import skill

RECIPES = {
    "health potion": ["red herb", "spring water"],
    "iron sword": ["iron bar", "leather strip"],
    "bread": ["flour", "water"],
}


@skill(side_effects=False)
def check_payment(customer: str) -> dict:
    """Check whether a customer has paid, and how many coins.

    Args:
        customer: The customer's name.
    """
    return {"customer": customer, "paid": True, "coins": 12}


@skill(side_effects=False)
def lookup_recipe(item: Literal["health potion", "iron sword", "bread"]) -> dict:
    """Look up what an item is made of.

    Args:
        item: The item to make.
    """
    return {"item": item, "ingredients": RECIPES[item], "price": 10}


@skill
def craft(
    item: Literal["health potion", "iron sword", "bread"],
    ingredients: list[str],
    quantity: Annotated[int, Field(ge=1, le=3, description="how many to make")] = 1,
) -> str:
    """Craft an item from its ingredients.

    Args:
        item: The item to make.
        ingredients: What goes into it (from its recipe).
        quantity: How many to make.
    """
    missing = [i for i in RECIPES[item] if i not in ingredients]
    if missing:
        raise ValueError(f"{item} also needs {', '.join(missing)}")
    return f"Crafted {quantity} {item}."


@skill
def hand_over(item: str, customer: str) -> str:
    """Hand an item to a customer.

    Args:
        item: What to hand over.
        customer: Who gets it.
    """
    return f"Handed the {item} to {customer}."
