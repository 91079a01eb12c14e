"""Ramesh's spoken lines for the rule-based vendor, and how a line is picked.

Every line is one or two short sentences that a speech engine can read aloud: no markdown, no
lists, prices in digits. Pools are small; which line is said depends only on the turn number and
the mood, so the same turn always gets the same words.
"""

from __future__ import annotations

from schemas.scenario import Item

LINES: dict[str, tuple[str, ...]] = {
    "greet": (
        "Namaste ji, come, come, everything on my cart came from the mandi this morning!",
        "Ram ram! The freshest fruit and vegetables in Johari Bazaar are right here.",
        "Aao ji, welcome! Tomatoes, apples, oranges, pumpkin, watermelon, what will you take?",
        "Namaste! Take your time and look, Ramesh sells only good stuff.",
    ),
    "greet_item": (
        "Namaste ji! You have good eyes, feel these {items} yourself, {quality}.",
        "Aao ji, pick one up, nothing in the bazaar beats my {items}.",
        "Ram ram! Those {items} came in fresh this morning, take a look.",
    ),
    "greet_cold": (
        "Arre, a little respect, ji, this is my stall.",
        "No need for such talk, just tell me what you want to buy.",
    ),
    "which_item": (
        "Tomatoes, apples, oranges, pumpkin, watermelon, all fresh today. Which one do you want?",
        "Everything is fresh, ji, which one shall I weigh for you?",
    ),
    "quote": (
        "For these {items}, {price} rupees a {unit}, and feel them yourself, {quality}.",
        "For you, {price} rupees a {unit}, the best {items} in the whole bazaar.",
        "Only {price} rupees a {unit}, ji, and you can pick the {items} yourself.",
    ),
    "repeat_quote": (
        "Like I said, {price} rupees a {unit}, and look, {quality}.",
        "It is {price} rupees a {unit}, ji, you will not find better {items} anywhere.",
        "{price} rupees a {unit}, ji, shall I weigh some {items} for you?",
    ),
    "inquiry_accept": (
        "Wah, you know good {items}! {price} rupees a {unit}, say pakka and I will weigh them.",
        "Very good, {price} rupees it is, say pakka and I pack them for you.",
    ),
    "counter_insult": (
        "{offer} rupees? Arre, that does not even pay for the cart, my price is still {price}.",
        "Are you joking, ji? {offer} is an insult for {items} like these, it is {price}.",
        "Bhagwan ke liye, {offer}? I paid more than that at the mandi, {price} only.",
    ),
    "counter_lowball": (
        "Too low, ji, too low. For you I can do {price}, not {offer}.",
        "{offer}? I have children to feed, ji, {price} is what I can do.",
        "Arre, {offer} is too little for {items} like these. Make it {price}.",
    ),
    "counter_fair": (
        "Acha, you bargain well. Make it {price} and we are close.",
        "Okay, okay, {price} rupees, because you asked nicely.",
        "{offer} is a bit low, ji, but I will come down to {price}.",
    ),
    "counter_good": (
        "Now we are talking, ji. Give me {price} and they are yours.",
        "So close! Make it {price} and I will pick the best {items} for you.",
        "{offer} is almost there, ji, {price} and we shake hands.",
    ),
    "last_price": (
        "{price} rupees is my last price, ji, I cannot go lower than that.",
        "Believe me, {price} is the last price, below that I lose money.",
        "Not a rupee under {price}, ji, these {items} cost me too.",
    ),
    "pushback": (
        "Everyone says that, ji! Okay, {price} rupees, just for you.",
        "Mehenga? Feel them, {quality}, but okay, {price}, not less.",
        "Acha, acha, I will make it {price}, now tell me your price.",
    ),
    "bulk": (
        "{qty} {unit}s? For a big order, {price} rupees a {unit}.",
        "You take {qty} {unit}s and I give {price} a {unit}, and some dhaniya free.",
    ),
    "deal": (
        "Pakka, {price} rupees a {unit}! I am packing the best {items} for you.",
        "Done, ji, {price} it is, and a little dhaniya free for you.",
        "Theek hai, {price} rupees, you bargain like a real Jaipuri, enjoy them!",
    ),
    "callback": (
        "Arre wait, wait! For you, {price} rupees, come back.",
        "Ruko ji, don't go! {price} rupees a {unit}, only for you.",
        "Oho, why so quick? Come, come, {price} rupees and we are done.",
    ),
    "walk_wait": (
        "Come closer, ji, {price} rupees is a very good price for these {items}.",
        "I am still here, {price} rupees a {unit}, tell me if you want them.",
        "Think about it, ji, {price} rupees and I pick the best ones for you.",
    ),
    "reengage": (
        "Good, good, come! {price} rupees a {unit}, what do you say?",
        "Acha, you are back! For you, {price}, and I pick the best ones.",
        "See, we are friends now. {price} rupees a {unit}, okay?",
    ),
    "agree_pending": (
        "Come, come, {price} rupees it is, just say pakka and I will pack them.",
        "Acha, {price} then, say pakka and they are yours.",
    ),
    "callback_plain": (
        "Arre wait, ji, at least look at my tomatoes before you go!",
        "Ruko, ruko, everything is fresh today, just have a look.",
    ),
    "close_walk": (
        "Theek hai, ji, go then, come back when you want good {items}.",
        "Okay, no problem, maybe tomorrow, Ramesh will be right here.",
    ),
    "close_angry": (
        "Enough! Go, find another shop, I don't sell to people who talk like this.",
        "Bas, bas, go away, I have other customers to look after.",
    ),
    "close_late": (
        "It is getting late, ji, I am closing my cart, come back tomorrow.",
        "The sun is going down and I must pack up, come tomorrow, ji.",
    ),
    "shoo": (
        "If you don't want to buy, go, don't waste my time.",
        "Go, go, find another shop if you talk like that.",
    ),
    "rude_hold": (
        "Watch your words, ji, thirty years I have sold here and my price is {price}.",
        "Mind your tongue! Nobody talks to Ramesh like that, and the price is still {price}.",
    ),
    "hold": (
        "So, {price} rupees a {unit}, shall I weigh them?",
        "Tell me your price, ji, right now it is {price}.",
        "Take your time, ji, but {price} rupees is a good price.",
    ),
    "wrap_final": (
        "It is getting late, ji, last price {price}, take it or leave it.",
        "I am packing up soon, {price} rupees final, say pakka and they are yours.",
    ),
    "over": (
        "We already finished, ji, come again tomorrow.",
    ),
}

# Items sold by the piece or cut, and irregular plurals; anything else just takes an "s".
_SPOKEN = {
    "Tomato": "tomatoes",
    "Potato": "potatoes",
    "Mango": "mangoes",
    "Pumpkin": "pumpkin",
    "Watermelon": "watermelon",
    "Green chili": "green chilies",
}
_UNITS = {"kg": "kilo"}


def spoken_items(item: Item | None) -> str:
    if item is None:
        return "vegetables"
    return _SPOKEN.get(item.name, f"{item.name.lower()}s")


def spoken_unit(item: Item | None) -> str:
    if item is None:
        return "kilo"
    return _UNITS.get(item.unit, item.unit)


def spoken_quality(item: Item | None) -> str:
    if item is None or not item.quality:
        return "fresh from the mandi this morning"
    return item.quality


def say(key: str, index: int, item: Item | None, **fields: object) -> str:
    """The line of pool `key` picked by `index`, with the item's words and `fields` filled in."""
    pool = LINES[key]
    template = pool[index % len(pool)]
    return template.format(
        items=spoken_items(item),
        unit=spoken_unit(item),
        quality=spoken_quality(item),
        **fields,
    )
