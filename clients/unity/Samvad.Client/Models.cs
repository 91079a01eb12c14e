// The vocabularies of the protocol, its HTTP bodies, the session state and the client's own results.
// The server's frames are in Events.cs, the learner report in Report.cs.
//
// The server may add fields at any time; Newtonsoft ignores the ones these classes do not name.
// Closed vocabularies (stage, mood, outcome, ...) are kept as strings so that a newer server with
// a new value never breaks an older game build; the constants classes below name today's values.

using System.Collections.Generic;
using Newtonsoft.Json;

namespace Samvad.Client
{
    /// <summary>Negotiation stages (`negotiation_state`, `stage.from`, `stage.to`).</summary>
    public static class Stages
    {
        public const string Greeting = "GREETING";
        public const string Inquiry = "INQUIRY";
        public const string Haggling = "HAGGLING";
        public const string Deal = "DEAL";
        public const string Walkaway = "WALKAWAY";
        public const string Closure = "CLOSURE";
    }

    /// <summary>Vendor moods (`vendor_mood`).</summary>
    public static class Moods
    {
        public const string Angry = "angry";
        public const string Annoyed = "annoyed";
        public const string Neutral = "neutral";
        public const string Friendly = "friendly";
        public const string Enthusiastic = "enthusiastic";
    }

    /// <summary>How a negotiation ended (`session.ended.outcome`, `SessionState.outcome`).</summary>
    public static class Outcomes
    {
        public const string Deal = "deal";
        public const string WalkedAway = "walked_away";
        public const string NoDeal = "no_deal";
        public const string TurnLimit = "turn_limit";
        public const string Stopped = "stopped";
        /// <summary>MAX_CONSECUTIVE_TIMEOUTS silences in a row (docs/coaching.md#silence).</summary>
        public const string TimedOut = "timed_out";
    }

    /// <summary>Learner levels (`level` of POST /api/sessions, `SessionState.Level`, the report's
    /// `Level`). What each changes is the scenario pack's data (docs/coaching.md#learner-levels).</summary>
    public static class Levels
    {
        public const string Beginner = "beginner";
        public const string Intermediate = "intermediate"; // the server's default
        public const string Advanced = "advanced";
    }

    /// <summary>`ReplyEvent.Mark`: a reply that is not a turn (nothing changes, the turn does not
    /// count, no mood, stage or tips follow). Null on a turn's reply.</summary>
    public static class Marks
    {
        /// <summary>The transcript's confidence was too low: the vendor asks to hear it again.</summary>
        public const string Clarify = "clarify";
        /// <summary>The learner was silent (the server's timer, or <see cref="SamvadClient.Silence"/>).</summary>
        public const string Nudge = "nudge";
        /// <summary>A recap for a player back after SESSION_RESTART_SECONDS.</summary>
        public const string WelcomeBack = "welcome_back";
    }

    /// <summary>`HintEvent.Kind`: 0 contextual, 1 structural, 2 and above reveal.</summary>
    public static class HintKinds
    {
        /// <summary>What is going on and what this culture expects here, in English.</summary>
        public const string Contextual = "contextual";
        /// <summary>A sentence frame in the target language with ____ blanks, and its English.</summary>
        public const string Structural = "structural";
        /// <summary>A whole line to say, and its English.</summary>
        public const string Reveal = "reveal";
    }

    /// <summary>Language codes the server accepts.</summary>
    public static class Languages
    {
        public const string HindiIndia = "hi-IN";
        public const string KannadaIndia = "kn-IN";
        public const string TamilIndia = "ta-IN";
        public const string EnglishIndia = "en-IN";
        public const string Hinglish = "hi-EN";
        public const string English = "en";
        public const string Japanese = "ja-JP";
        public const string DarijaMorocco = "ar-MA";
        public const string FrenchMorocco = "fr-MA";
    }

    /// <summary>Codes of `error` frames (docs/protocol.md §6).</summary>
    public static class ErrorCodes
    {
        public const string BadFrame = "bad_frame";
        public const string UnknownType = "unknown_type";
        public const string Invalid = "invalid";
        public const string TooLarge = "too_large";
        public const string RateLimited = "rate_limited";
        public const string Forbidden = "forbidden";
        public const string SessionEnded = "session_ended";
        /// <summary>A command name this server does not know.</summary>
        public const string UnknownCommand = "unknown_command";
        /// <summary><see cref="SamvadClient.Repeat"/> before the vendor has said anything.</summary>
        public const string NothingToRepeat = "nothing_to_repeat";
        /// <summary><see cref="SamvadClient.Undo"/> with no answered turn left to take back (before any
        /// turn, or after 3 in a row).</summary>
        public const string NothingToUndo = "nothing_to_undo";
        /// <summary><see cref="SamvadClient.ReportPlayback"/> for a turn the vendor has not answered, or
        /// one that was undone.</summary>
        public const string UnknownTurn = "unknown_turn";
        /// <summary><see cref="SamvadClient.ReportPlayback"/> with heardChars beyond the reply's text.</summary>
        public const string HeardOutOfRange = "heard_out_of_range";
        public const string Unavailable = "unavailable";
        public const string Internal = "internal";
    }

    /// <summary>WebSocket close codes the server uses (docs/protocol.md §6).</summary>
    public static class CloseCodes
    {
        public const int GoingAway = 1001;
        /// <summary>The client broke the WebSocket protocol: a bug to fix, not to retry.</summary>
        public const int ProtocolError = 1002;
        /// <summary>A text frame that is not valid UTF-8: a bug to fix, not to retry.</summary>
        public const int InvalidPayload = 1007;
        public const int MessageTooBig = 1009;
        /// <summary>The client missed the server's keepalive pings.</summary>
        public const int MissedPings = 1011;
        /// <summary>The server is restarting (uvicorn's close before the application's 1001).</summary>
        public const int ServiceRestart = 1012;
        /// <summary>The session could not be rebuilt: the Neo4j mirror cannot answer yet.</summary>
        public const int TryAgainLater = 1013;
        public const int Unauthorized = 4401;
        public const int WrongSession = 4403;
        public const int UnknownSession = 4404;
        public const int Idle = 4408;
        public const int Superseded = 4409;
        public const int Evicted = 4410;
        public const int RateAbuse = 4429;
        public const int SlowConsumer = 4430;
    }

    // ------------------------------------------------------------------------------ HTTP

    /// <summary>The body of POST /api/sessions; null fields are left out so the server's defaults apply.</summary>
    public sealed class CreateSessionRequest
    {
        [JsonProperty("scenario", NullValueHandling = NullValueHandling.Ignore)]
        public string Scenario { get; set; }

        [JsonProperty("input_language", NullValueHandling = NullValueHandling.Ignore)]
        public string InputLanguage { get; set; }

        [JsonProperty("target_language", NullValueHandling = NullValueHandling.Ignore)]
        public string TargetLanguage { get; set; }

        [JsonProperty("learner_id", NullValueHandling = NullValueHandling.Ignore)]
        public string LearnerId { get; set; }

        /// <summary>`beginner`, `intermediate` or `advanced` (<see cref="Levels"/>); null: the server's
        /// default, intermediate.</summary>
        [JsonProperty("level", NullValueHandling = NullValueHandling.Ignore)]
        public string Level { get; set; }
    }

    /// <summary>The answer of POST /api/sessions.</summary>
    public sealed class SessionInfo
    {
        [JsonProperty("session_id")] public string SessionId { get; set; }
        [JsonProperty("player_token")] public string PlayerToken { get; set; }
        [JsonProperty("spectator_token")] public string SpectatorToken { get; set; }
        [JsonProperty("expires_in")] public int ExpiresIn { get; set; }
        [JsonProperty("ws_url")] public string WsUrl { get; set; }
    }

    // ------------------------------------------------------------------------------ shared pieces

    public sealed class Point
    {
        [JsonProperty("turn")] public int Turn { get; set; }
        [JsonProperty("value")] public int Value { get; set; }
    }

    public sealed class StageChange
    {
        [JsonProperty("turn")] public int Turn { get; set; }
        [JsonProperty("from_stage")] public string FromStage { get; set; }
        [JsonProperty("to_stage")] public string ToStage { get; set; }
    }

    /// <summary>One line of the conversation in `SessionState.Transcript`.</summary>
    public sealed class TranscriptLine
    {
        [JsonProperty("turn")] public int Turn { get; set; }
        /// <summary>"learner" or "vendor".</summary>
        [JsonProperty("role")] public string Role { get; set; }
        [JsonProperty("text")] public string Text { get; set; }
    }

    public sealed class Summary
    {
        [JsonProperty("outcome")] public string Outcome { get; set; }
        [JsonProperty("turns")] public int Turns { get; set; }
        [JsonProperty("item")] public string Item { get; set; }
        [JsonProperty("first_quote")] public int? FirstQuote { get; set; }
        [JsonProperty("final_price")] public int? FinalPrice { get; set; }
        [JsonProperty("discount_pct")] public double? DiscountPct { get; set; }
        [JsonProperty("final_happiness")] public int FinalHappiness { get; set; }
        [JsonProperty("insults")] public int Insults { get; set; }
        [JsonProperty("stages")] public List<string> Stages { get; set; }
    }

    /// <summary>The session as `welcome`, `snapshot` and GET /api/sessions/{id} describe it.</summary>
    public sealed class SessionState
    {
        [JsonProperty("session_id")] public string SessionId { get; set; }
        [JsonProperty("scenario")] public string Scenario { get; set; }
        [JsonProperty("learner_id")] public string LearnerId { get; set; }
        [JsonProperty("input_language")] public string InputLanguage { get; set; }
        [JsonProperty("target_language")] public string TargetLanguage { get; set; }
        [JsonProperty("stage")] public string Stage { get; set; }
        [JsonProperty("happiness_score")] public int HappinessScore { get; set; }
        [JsonProperty("vendor_mood")] public string VendorMood { get; set; }
        [JsonProperty("turn")] public int Turn { get; set; }
        [JsonProperty("max_turns")] public int MaxTurns { get; set; }
        [JsonProperty("item")] public string Item { get; set; }
        [JsonProperty("object_grabbed")] public string ObjectGrabbed { get; set; }
        [JsonProperty("vendor_quote")] public int? VendorQuote { get; set; }
        [JsonProperty("first_quote")] public int? FirstQuote { get; set; }
        [JsonProperty("last_offer")] public int? LastOffer { get; set; }
        [JsonProperty("is_terminal")] public bool IsTerminal { get; set; }
        [JsonProperty("outcome")] public string Outcome { get; set; }
        [JsonProperty("seq")] public long Seq { get; set; }
        [JsonProperty("created_at")] public double CreatedAt { get; set; }
        [JsonProperty("updated_at")] public double UpdatedAt { get; set; }
        [JsonProperty("happiness_history")] public List<Point> HappinessHistory { get; set; }
        [JsonProperty("quotes")] public List<Point> Quotes { get; set; }
        [JsonProperty("offers")] public List<Point> Offers { get; set; }
        [JsonProperty("stage_changes")] public List<StageChange> StageChanges { get; set; }
        [JsonProperty("summary")] public Summary Summary { get; set; }
        /// <summary>The learner's level (<see cref="Levels"/>).</summary>
        [JsonProperty("level")] public string Level { get; set; }
        /// <summary>The last 60 lines of the conversation, oldest first. Kept as the server last sent
        /// it (welcome, snapshot, undo): the client does not append replies to it.</summary>
        [JsonProperty("transcript")] public List<TranscriptLine> Transcript { get; set; }

        /// <summary>A shallow copy (the lists are shared), so a caller can hold a stable view.</summary>
        public SessionState Copy()
        {
            return (SessionState)MemberwiseClone();
        }
    }

    /// <summary>Where a turn's time went, in milliseconds (`reply.timings`).</summary>
    public sealed class TurnTimings
    {
        [JsonProperty("brain")] public string Brain { get; set; }
        [JsonProperty("llm_calls")] public int LlmCalls { get; set; }
        [JsonProperty("retries")] public int Retries { get; set; }
        [JsonProperty("corrective_asks")] public int CorrectiveAsks { get; set; }
        [JsonProperty("prompt_tokens")] public int PromptTokens { get; set; }
        [JsonProperty("completion_tokens")] public int CompletionTokens { get; set; }
        [JsonProperty("first_token_ms")] public double? FirstTokenMs { get; set; }
        [JsonProperty("first_delta_ms")] public double? FirstDeltaMs { get; set; }
        [JsonProperty("queue_ms")] public double QueueMs { get; set; }
        [JsonProperty("brain_ms")] public double BrainMs { get; set; }
        [JsonProperty("validation_ms")] public double ValidationMs { get; set; }
        [JsonProperty("total_ms")] public double TotalMs { get; set; }
        [JsonProperty("prompt_version")] public string PromptVersion { get; set; }
        /// <summary>A spoken turn's: the silence that ended an open-microphone turn (null for push-to-talk).</summary>
        [JsonProperty("end_of_turn_ms")] public double? EndOfTurnMs { get; set; }
        /// <summary>A spoken turn's: from the utterance's end to its transcript (null for a typed turn).</summary>
        [JsonProperty("stt_ms")] public double? SttMs { get; set; }
        [JsonProperty("stt")] public string Stt { get; set; }
    }

    /// <summary>The vendor's first audio after a spoken turn, in milliseconds (`reply.audio` `timings`).</summary>
    public sealed class SpokenTimings
    {
        /// <summary>The learner's utterance (or open-microphone turn) it answers.</summary>
        [JsonProperty("in_reply_to")] public string InReplyTo { get; set; }
        [JsonProperty("tts_first_byte_ms")] public double TtsFirstByteMs { get; set; }
        /// <summary>From the end of the learner's utterance to this audio leaving the server.</summary>
        [JsonProperty("first_audio_ms")] public double FirstAudioMs { get; set; }
    }

    // ------------------------------------------------------------------------------ client-side results

    /// <summary>The server accepted (and made durable) a frame the client sent.</summary>
    public sealed class AckResult
    {
        public string Id { get; internal set; }
        /// <summary>True when the server had applied this id already (a re-send after a reconnect).</summary>
        public bool Duplicate { get; internal set; }
        /// <summary>How many times the client put the frame on a socket before the ack came.</summary>
        public int Attempts { get; internal set; }
    }

    /// <summary>Why the socket went away and whether the client will try again.</summary>
    public sealed class DisconnectInfo
    {
        /// <summary>The close code the server sent, or null when the connection simply broke.</summary>
        public int? CloseCode { get; internal set; }
        public string Reason { get; internal set; }
        public bool WillReconnect { get; internal set; }

        public override string ToString()
        {
            return string.Format("closed {0} ({1}){2}", CloseCode.HasValue ? CloseCode.Value.ToString() : "without a code",
                Reason ?? "", WillReconnect ? ", reconnecting" : "");
        }
    }

    /// <summary>The client is about to wait `DelayMs` and then try to connect again.</summary>
    public sealed class ReconnectInfo
    {
        public int Attempt { get; internal set; }
        public int DelayMs { get; internal set; }
    }

    /// <summary>Counters for diagnostics and tests.</summary>
    public sealed class ClientStats
    {
        public int Connections { get; internal set; }
        public int Reconnects { get; internal set; }
        public int FramesSent { get; internal set; }
        public int FramesResent { get; internal set; }
        public int Acks { get; internal set; }
        public int DuplicateAcks { get; internal set; }
        public int EventsApplied { get; internal set; }
        public int StaleEventsDropped { get; internal set; }
        public int GapEventsDropped { get; internal set; }
        public int ResumesSent { get; internal set; }
        public int Snapshots { get; internal set; }
        public int Pongs { get; internal set; }
        public double? LastRttMs { get; internal set; }

        internal ClientStats Copy()
        {
            return (ClientStats)MemberwiseClone();
        }
    }
}
