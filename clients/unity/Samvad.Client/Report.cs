// The learner report (docs/coaching.md, `session.report` and GET /api/sessions/{id}/report).

using System.Collections.Generic;
using Newtonsoft.Json;

namespace Samvad.Client
{
    /// <summary>The learner report of an ended session (docs/coaching.md): the parts a game shows.
    /// The whole report is in `Raw`, as the server sent it.</summary>
    public sealed class LearnerReport
    {
        [JsonProperty("outcome")] public string Outcome { get; set; }
        [JsonProperty("item")] public string Item { get; set; }
        [JsonProperty("turns")] public int Turns { get; set; }
        [JsonProperty("score")] public int Score { get; set; }
        [JsonProperty("score_parts")] public Dictionary<string, int> ScoreParts { get; set; }
        [JsonProperty("suggestions")] public List<string> Suggestions { get; set; }
        [JsonProperty("cards_earned")] public List<EarnedCard> CardsEarned { get; set; }
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
