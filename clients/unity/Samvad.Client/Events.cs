// The frames of the session socket that the server sends (docs/protocol.md §4), as typed views.
// Unknown fields are ignored; closed vocabularies stay strings (Models.cs names their values).

using System.Collections.Generic;
using Newtonsoft.Json;

namespace Samvad.Client
{
    /// <summary>Every server frame carries its type and session.</summary>
    public abstract class ServerEvent
    {
        [JsonProperty("type")] public string Type { get; set; }
        [JsonProperty("session_id")] public string SessionId { get; set; }
    }

    /// <summary>A frame of the session stream: `seq` rises by exactly one per event.</summary>
    public abstract class SequencedEvent : ServerEvent
    {
        [JsonProperty("seq")] public long Seq { get; set; }
    }

    /// <summary>An event that answers a frame the client sent (`in_reply_to` is that frame's id, or
    /// null when the server spoke unasked): a reply, a repeat, a hint, an undo, a heard.</summary>
    public interface IAnswer
    {
        string InReplyTo { get; }
    }

    public sealed class WelcomeEvent : ServerEvent
    {
        [JsonProperty("role")] public string Role { get; set; }
        [JsonProperty("seq")] public long Seq { get; set; }
        [JsonProperty("state")] public SessionState State { get; set; }
        [JsonProperty("protocol")] public string Protocol { get; set; }
        [JsonProperty("limits")] public Dictionary<string, long> Limits { get; set; }

        /// <summary>Set by the client: false on the first connection, true after a reconnect.</summary>
        [JsonIgnore] public bool IsReconnect { get; set; }
    }

    public sealed class AckEvent : ServerEvent
    {
        [JsonProperty("id")] public string Id { get; set; }
        [JsonProperty("duplicate")] public bool Duplicate { get; set; }
    }

    public sealed class PongEvent : ServerEvent
    {
        [JsonProperty("id")] public string Id { get; set; }
        [JsonProperty("t")] public double? T { get; set; }

        /// <summary>Round-trip time in milliseconds, filled in by the client when `t` was its own.</summary>
        [JsonIgnore] public double? RttMs { get; set; }
    }

    public sealed class ErrorEvent : ServerEvent
    {
        [JsonProperty("code")] public string Code { get; set; }
        [JsonProperty("message")] public string Message { get; set; }
        [JsonProperty("id")] public string Id { get; set; }
    }

    /// <summary>The vendor's validated answer to one learner turn, or (with a <see cref="Mark"/>) a line
    /// that is not a turn.</summary>
    public sealed class ReplyEvent : SequencedEvent, IAnswer
    {
        /// <summary>Null on a turn's reply. Otherwise the reply is not a turn (nothing changed, the turn
        /// does not count, no mood, stage or tips follow) and says why (<see cref="Marks"/>):
        /// "clarify" (unclear speech, asked again), "nudge" (the learner was silent; in_reply_to null),
        /// "welcome_back" (a recap after a long absence; in_reply_to null). Send
        /// <see cref="SamvadClient.ReportPlayback"/> only for replies without a mark.</summary>
        [JsonProperty("mark")] public string Mark { get; set; }
        [JsonProperty("policy")] public string Policy { get; set; }
        [JsonProperty("sources")] public List<string> Sources { get; set; }
        [JsonProperty("turn")] public int Turn { get; set; }
        [JsonProperty("text")] public string Text { get; set; }
        [JsonProperty("happiness_score")] public int HappinessScore { get; set; }
        [JsonProperty("negotiation_state")] public string NegotiationState { get; set; }
        [JsonProperty("vendor_mood")] public string VendorMood { get; set; }
        [JsonProperty("counter_price")] public int? CounterPrice { get; set; }
        /// <summary>A line the learner could say next, in the target language; empty at a level without
        /// unprompted hints (advanced) and on replies with a mark.</summary>
        [JsonProperty("suggested_user_response")] public string SuggestedUserResponse { get; set; }
        /// <summary>Its English, when the brain gave one (else empty).</summary>
        [JsonProperty("suggested_user_response_english")] public string SuggestedUserResponseEnglish { get; set; }
        [JsonProperty("is_terminal")] public bool IsTerminal { get; set; }
        [JsonProperty("in_reply_to")] public string InReplyTo { get; set; }
        /// <summary>The transcript this reply answers, as the server read it (null on nudges and
        /// welcome backs).</summary>
        [JsonProperty("learner_text")] public string LearnerText { get; set; }
        [JsonProperty("item")] public string Item { get; set; }
        [JsonProperty("learner_offer")] public int? LearnerOffer { get; set; }
        [JsonProperty("offer_assessment")] public string OfferAssessment { get; set; }
        [JsonProperty("fallback")] public bool Fallback { get; set; }
        [JsonProperty("withdrawn_stream")] public bool WithdrawnStream { get; set; }
        [JsonProperty("flags")] public List<string> Flags { get; set; }
        [JsonProperty("timings")] public TurnTimings Timings { get; set; }

        /// <summary>True for a learner turn's reply (no <see cref="Mark"/>).</summary>
        [JsonIgnore] public bool IsTurn { get { return Mark == null; } }
    }

    /// <summary>A piece of the vendor's words while a streaming brain is still thinking.</summary>
    public sealed class ReplyDeltaEvent : ServerEvent
    {
        [JsonProperty("turn")] public int Turn { get; set; }
        [JsonProperty("text")] public string Text { get; set; }
        /// <summary>The vendor's words for the turn are complete (Text is then empty).</summary>
        [JsonProperty("end")] public bool End { get; set; }
    }

    /// <summary>What the recogniser has heard so far of open-microphone turn `Id`, at a pause in it.</summary>
    public sealed class SpeechPartialEvent : SequencedEvent
    {
        [JsonProperty("id")] public string Id { get; set; }
        [JsonProperty("text")] public string Text { get; set; }
        [JsonProperty("confidence")] public double? Confidence { get; set; }
    }

    /// <summary>What the recogniser heard of the utterance `Id` (docs/voice.md), before its turn.</summary>
    public sealed class SpeechEvent : SequencedEvent
    {
        [JsonProperty("id")] public string Id { get; set; }
        [JsonProperty("text")] public string Text { get; set; }
        /// <summary>0-1, or null when the recogniser gives none.</summary>
        [JsonProperty("confidence")] public double? Confidence { get; set; }
        [JsonProperty("language")] public string Language { get; set; }
        [JsonProperty("duration_ms")] public int DurationMs { get; set; }
        /// <summary>Loudness every 50 ms, 0-1: a level meter or waveform.</summary>
        [JsonProperty("levels")] public List<double> Levels { get; set; }
        [JsonProperty("stt")] public string Stt { get; set; }
        /// <summary>Recognition failed: the turn goes on as unclear speech (the vendor asks again).</summary>
        [JsonProperty("fallback")] public bool Fallback { get; set; }
        /// <summary>The silence the server waited before ending an open-microphone turn; null for push-to-talk.</summary>
        [JsonProperty("end_of_turn_ms")] public double? EndOfTurnMs { get; set; }
        /// <summary>From the utterance's end to this transcript.</summary>
        [JsonProperty("stt_ms")] public double? SttMs { get; set; }
    }

    /// <summary>A piece of the vendor's spoken reply to `Turn`: PCM16 mono at `SampleRate`.</summary>
    public sealed class ReplyAudioEvent : ServerEvent
    {
        [JsonProperty("turn")] public int Turn { get; set; }
        [JsonProperty("sentence")] public int Sentence { get; set; }
        [JsonProperty("chunk")] public int Chunk { get; set; }
        /// <summary>The sentence, on chunk 0.</summary>
        [JsonProperty("text")] public string Text { get; set; }
        [JsonProperty("sample_rate")] public int SampleRate { get; set; }
        /// <summary>Base64 in JSON; <see cref="Pcm"/> decodes it.</summary>
        [JsonProperty("data")] public string Data { get; set; }
        [JsonProperty("last")] public bool Last { get; set; }
        [JsonProperty("final")] public bool Final { get; set; }
        [JsonProperty("degraded")] public bool Degraded { get; set; }
        [JsonProperty("tts")] public string Tts { get; set; }
        /// <summary>This chunk's [start_ms, viseme 0-14] pairs from its first sample (docs/voice.md).</summary>
        [JsonProperty("visemes")] public int[][] Visemes { get; set; }
        /// <summary>Which method made them: <c>espeak</c> (exact) or <c>estimate</c>; empty for none.</summary>
        [JsonProperty("visemes_source")] public string VisemesSource { get; set; }
        /// <summary>On the first piece of the reply to a spoken turn: TTS first byte and first audio; else null.</summary>
        [JsonProperty("timings")] public SpokenTimings Timings { get; set; }
        /// <summary>A thinking sound ("Hmm...") played while the reply to `Turn` is late: sentence -1, no
        /// text, not part of the reply's words.</summary>
        [JsonProperty("filler")] public bool Filler { get; set; }

        public byte[] Pcm { get { return string.IsNullOrEmpty(Data) ? new byte[0] : System.Convert.FromBase64String(Data); } }
    }

    /// <summary>Throw away the deltas shown so far for `Turn`; the coming reply replaces them.</summary>
    public sealed class ReplyWithdrawnEvent : ServerEvent
    {
        [JsonProperty("turn")] public int Turn { get; set; }
        [JsonProperty("reason")] public string Reason { get; set; }
    }

    public sealed class MoodEvent : SequencedEvent
    {
        [JsonProperty("turn")] public int Turn { get; set; }
        [JsonProperty("happiness_score")] public int HappinessScore { get; set; }
        [JsonProperty("vendor_mood")] public string VendorMood { get; set; }
        [JsonProperty("delta")] public int Delta { get; set; }
    }

    public sealed class StageEvent : SequencedEvent
    {
        [JsonProperty("turn")] public int Turn { get; set; }
        [JsonProperty("from")] public string From { get; set; }
        [JsonProperty("to")] public string To { get; set; }
        [JsonProperty("forced")] public bool Forced { get; set; }
    }

    public sealed class SessionEndedEvent : SequencedEvent
    {
        [JsonProperty("outcome")] public string Outcome { get; set; }
        [JsonProperty("summary")] public Summary Summary { get; set; }
    }

    /// <summary>One coaching card. A grounded card's title and body are the teacher's own words
    /// (docs/knowledge.md); SourceChunkIds say which note they come from.</summary>
    public sealed class TipCard
    {
        [JsonProperty("card_id")] public string CardId { get; set; }
        [JsonProperty("title")] public string Title { get; set; }
        [JsonProperty("body")] public string Body { get; set; }
        [JsonProperty("type")] public string Type { get; set; }
        [JsonProperty("grounded")] public bool Grounded { get; set; }
        [JsonProperty("confidence_score")] public double ConfidenceScore { get; set; }
        [JsonProperty("source_chunk_ids")] public List<string> SourceChunkIds { get; set; }
    }

    /// <summary>The vendor's last line again, for the `repeat` command.</summary>
    public sealed class RepeatEvent : SequencedEvent, IAnswer
    {
        [JsonProperty("turn")] public int Turn { get; set; }
        [JsonProperty("text")] public string Text { get; set; }
        [JsonProperty("in_reply_to")] public string InReplyTo { get; set; }
    }

    /// <summary>Help for the learner's next line: the answer to <see cref="SamvadClient.Hint"/>, or given
    /// unasked (<see cref="Offered"/>: a beginner's, after a silence). Nothing else changes.</summary>
    public sealed class HintEvent : SequencedEvent, IAnswer
    {
        /// <summary>The learner turn the hint is for: the next one.</summary>
        [JsonProperty("turn")] public int Turn { get; set; }
        /// <summary>0, 1, 2, ...: rises with each hint in the same turn, back to 0 with the next turn
        /// (and with an undo).</summary>
        [JsonProperty("level")] public int Level { get; set; }
        /// <summary><see cref="HintKinds"/>: contextual (level 0), structural (1), reveal (2+).</summary>
        [JsonProperty("kind")] public string Kind { get; set; }
        /// <summary>The pack's situation, e.g. "greet", "open", "counter".</summary>
        [JsonProperty("situation")] public string Situation { get; set; }
        [JsonProperty("text")] public string Text { get; set; }
        /// <summary>The English of a structural or reveal hint (empty for a contextual one, which is
        /// already English).</summary>
        [JsonProperty("english")] public string English { get; set; }
        [JsonProperty("offered")] public bool Offered { get; set; }
        [JsonProperty("in_reply_to")] public string InReplyTo { get; set; }
    }

    /// <summary>The learner's last answered turn taken back (<see cref="SamvadClient.Undo"/>):
    /// <see cref="State"/> is the session exactly as before that turn, and the client's state is
    /// replaced with it. Seq keeps rising: events are never erased.</summary>
    public sealed class UndoEvent : SequencedEvent, IAnswer
    {
        /// <summary>The learner turn taken back.</summary>
        [JsonProperty("turn")] public int Turn { get; set; }
        [JsonProperty("state")] public SessionState State { get; set; }
        [JsonProperty("in_reply_to")] public string InReplyTo { get; set; }
    }

    /// <summary>What the learner heard of the vendor's reply to turn <see cref="Turn"/>, after
    /// <see cref="SamvadClient.ReportPlayback"/>. When the reply named a new price that was not heard
    /// (a barge-in before it), the price does not bind: <see cref="QuoteUnbound"/> is true and
    /// <see cref="VendorQuote"/> is the quote that stands again (null: none).</summary>
    public sealed class HeardEvent : SequencedEvent, IAnswer
    {
        [JsonProperty("turn")] public int Turn { get; set; }
        [JsonProperty("heard_chars")] public int HeardChars { get; set; }
        [JsonProperty("interrupted")] public bool Interrupted { get; set; }
        [JsonProperty("heard_text")] public string HeardText { get; set; }
        [JsonProperty("quote_unbound")] public bool QuoteUnbound { get; set; }
        /// <summary>The vendor's standing quote now.</summary>
        [JsonProperty("vendor_quote")] public int? VendorQuote { get; set; }
        [JsonProperty("in_reply_to")] public string InReplyTo { get; set; }
    }

    /// <summary>The coaching cards for learner turn `Turn`, after that turn's other events.</summary>
    public sealed class TipsEvent : SequencedEvent
    {
        [JsonProperty("turn")] public int Turn { get; set; }
        [JsonProperty("cards")] public List<TipCard> Cards { get; set; }
    }

    /// <summary>Sent instead of a replay that the server can no longer give: replace your state.</summary>
    public sealed class SnapshotEvent : SequencedEvent
    {
        [JsonProperty("state")] public SessionState State { get; set; }
        [JsonProperty("replayed")] public bool Replayed { get; set; }
        [JsonProperty("reason")] public string Reason { get; set; }
    }
}
