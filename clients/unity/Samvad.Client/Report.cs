// The learner report (docs/coaching.md, `session.report` and GET /api/sessions/{id}/report).

using System.Collections.Generic;
using Newtonsoft.Json;

namespace Samvad.Client
{
    /// <summary>The learner report of an ended session (docs/coaching.md): the parts a game shows.
    /// The price, curve, stages and etiquette are not read here; GET /api/sessions/{id}/report has
    /// the whole report.</summary>
    public sealed class LearnerReport
    {
        [JsonProperty("outcome")] public string Outcome { get; set; }
        [JsonProperty("item")] public string Item { get; set; }
        [JsonProperty("turns")] public int Turns { get; set; }
        [JsonProperty("score")] public int Score { get; set; }
        [JsonProperty("score_parts")] public Dictionary<string, int> ScoreParts { get; set; }
        [JsonProperty("suggestions")] public List<string> Suggestions { get; set; }
        [JsonProperty("cards_earned")] public List<EarnedCard> CardsEarned { get; set; }
        /// <summary>The learner's level (<see cref="Levels"/>).</summary>
        [JsonProperty("level")] public string Level { get; set; }
        /// <summary>How much help the learner took; none of it costs points.</summary>
        [JsonProperty("coaching")] public CoachingCounts Coaching { get; set; }
        /// <summary>Each change the rules engine made to a vendor reply, in plain words.</summary>
        [JsonProperty("clamps")] public List<Clamp> Clamps { get; set; }
    }

    /// <summary>The report's `coaching` counts.</summary>
    public sealed class CoachingCounts
    {
        /// <summary>Hints asked for, by level: [0] contextual, [1] structural, [2] reveal (level 2+).</summary>
        [JsonProperty("hints")] public List<int> Hints { get; set; }
        /// <summary>Level-0 hints given unasked (a beginner's, after a silence).</summary>
        [JsonProperty("hints_offered")] public int HintsOffered { get; set; }
        [JsonProperty("repeats")] public int Repeats { get; set; }
        [JsonProperty("undos")] public int Undos { get; set; }
        /// <summary>Silences: the server's timer running out, and `silence` frames.</summary>
        [JsonProperty("timeouts")] public int Timeouts { get; set; }
        /// <summary>Transcripts asked again (confidence under the threshold).</summary>
        [JsonProperty("unclear")] public int Unclear { get; set; }
    }

    /// <summary>One flag on a vendor reply (a rule of the engine, or a line made speakable).</summary>
    public sealed class Clamp
    {
        [JsonProperty("turn")] public int Turn { get; set; }
        /// <summary>The flag, as in `ReplyEvent.Flags` (e.g. "quote_rise", "too_long").</summary>
        [JsonProperty("flag")] public string Flag { get; set; }
        /// <summary>What it means, in plain words (schemas/flags.py).</summary>
        [JsonProperty("explanation")] public string Explanation { get; set; }
    }

    public sealed class EarnedCard
    {
        [JsonProperty("card_id")] public string CardId { get; set; }
        [JsonProperty("title")] public string Title { get; set; }
        [JsonProperty("turn")] public int Turn { get; set; }
    }

    /// <summary>Follows `session.ended`: what the session taught.</summary>
    public sealed class SessionReportEvent : SequencedEvent
    {
        [JsonProperty("report")] public LearnerReport Report { get; set; }
    }
}
