// Every flag a `reply` may carry, in plain words: what the server changed in the vendor's proposed
// line before anyone saw it. The same words as schemas/flags.py FLAG_WORDS, which is the source;
// tests/test_flag_words.py checks that the two tables hold the same flags and words.

export const FLAG_WORDS = {
  offer_assessment: "The server judged the learner's offer itself; the vendor's own label was set aside.",
  insult_min_drop: "An insulting offer costs the vendor's goodwill at least the fixed minimum.",
  lowball_min_drop: "A lowball offer costs the vendor's goodwill at least the fixed minimum.",
  max_mood_delta: "The vendor's mood may only move so far in one turn; the change was capped.",
  happiness_range: "Happiness stays between 0 and 100.",
  illegal_transition: "The conversation cannot jump to that stage from here; it stayed where it was.",
  walkaway_reentry_happiness: "The vendor is still too unhappy to take the learner back into the haggle.",
  max_turns: "The turn limit was reached, so the session closed.",
  quote_rise: "Once haggling starts, a vendor may not raise his price; the earlier price stands.",
  below_floor: "The vendor will not go below his floor price; the floor stands.",
  vendor_mood: "The vendor's mood follows his happiness; the mood his brain proposed was set aside.",
  markdown: "Formatting marks were taken out so the line can be spoken.",
  link: "A sentence with a web link was left out (or ended before the link) so the line can be spoken.",
  too_long: "The line was cut to the sentences a learner at this level hears at once (two, or one for a beginner), keeping one that names his price.",
  text_price_rewritten: "The vendor's words named a price the rules did not allow; they now say the price that stands.",
  text_price_dropped: "The vendor's words named a price when no price stands; that part was left out.",
  quote_unsaid: "The vendor's new price was only in words left out of his line, so the learner never heard it; his earlier price stands.",
  fallback: "The vendor's brain did not answer in time; he said a safe line and nothing changed.",
};

// A flag in plain words (one this table does not know is shown as itself).
export function explain(flag) {
  return Object.hasOwn(FLAG_WORDS, flag) ? FLAG_WORDS[flag] : flag;
}
