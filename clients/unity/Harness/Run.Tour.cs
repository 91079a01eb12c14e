// A short tour of one scenario pack: create a session of that pack, say a few lines, and check
// that every reply comes, that each answered turn brings its coaching cards, and that the event
// stream has no hole; then `repeat` and `stop` through the client's commands.
//   mono Harness.exe --url URL --scenario kyoto-antiques --say "..." --say "..."

using System;
using System.Collections.Generic;
using System.Linq;
using System.Threading.Tasks;
using Newtonsoft.Json.Linq;
using Samvad.Client;

namespace Samvad.Harness
{
    sealed partial class Run
    {
        public async Task TourAsync(string scenario, IList<string> lines)
        {
            using (var api = new SamvadApi(_url))
            {
                var info = await api.CreateSessionAsync(new CreateSessionRequest { Scenario = scenario, LearnerId = "unity-tour" })
                                    .ConfigureAwait(false);
                Fact("scenario", scenario);
                var player = new SamvadClient(_url, info.SessionId, info.PlayerToken, Options(false));
                var seen = new Recorder();
                seen.Attach(player);
                try
                {
                    await Within(player.ConnectAsync(), Step, "connecting the player").ConfigureAwait(false);
                    var texts = new JArray();
                    foreach (string line in lines)
                    {
                        var frame = player.SendTranscript(line, 0.95);
                        var reply = await Within(frame.Reply, Step, "the reply to " + line).ConfigureAwait(false);
                        texts.Add(reply.Text);
                        Log("vendor: " + reply.Text);
                    }
                    var settle = DateTime.UtcNow + TimeSpan.FromSeconds(5);
                    while (seen.TipsCopy().Count < lines.Count && DateTime.UtcNow < settle)
                    {
                        await Task.Delay(25).ConfigureAwait(false);
                    }
                    var tips = seen.TipsCopy();
                    string problem;
                    Check(seen.Contiguous(out problem), "tour: " + problem);
                    Check(tips.Count == lines.Count, tips.Count + " tips events for " + lines.Count + " turns");
                    Check(tips.All(t => t.Cards != null && t.Cards.Count >= 1), "a tips event without cards");
                    Check(seen.ErrorsCopy().Count == 0, "errors: " + string.Join("; ", seen.ErrorsCopy()));
                    Fact("replies", texts);
                    Fact("tips", tips.Count);
                    Fact("grounded_cards", tips.Sum(t => t.Cards.Count(c => c.Grounded)));
                    // Unclear speech is asked again, and is not a turn.
                    var mumble = player.SendTranscript("mmh... hm", 0.4);
                    var asked = await Within(mumble.Reply, Step, "the answer to a mumble").ConfigureAwait(false);
                    Check(asked.Mark == "clarify" && asked.Turn == lines.Count,
                          "a mumble got mark " + asked.Mark + " at turn " + asked.Turn);
                    Fact("clarify", asked.Text);
                    // The commands: the last line again, then the end with its report.
                    var repeatedLine = new TaskCompletionSource<RepeatEvent>(TaskCreationOptions.RunContinuationsAsynchronously);
                    player.Repeated += r => repeatedLine.TrySetResult(r);
                    var reported = new TaskCompletionSource<SessionReportEvent>(TaskCreationOptions.RunContinuationsAsynchronously);
                    player.Report += r => reported.TrySetResult(r);
                    await Within(player.Repeat().Acked, Step, "the ack of repeat").ConfigureAwait(false);
                    var again = await Within(repeatedLine.Task, Step, "the repeated line").ConfigureAwait(false);
                    Check(again.Text == (string)texts.Last, "repeat said " + again.Text + ", not the last line");
                    await Within(player.Stop().Acked, Step, "the ack of stop").ConfigureAwait(false);
                    var report = await Within(reported.Task, Step, "the report after stop").ConfigureAwait(false);
                    Check(report.Report.Outcome == Outcomes.Stopped, "stop ended the session as " + report.Report.Outcome);
                    Fact("stopped", report.Report.Outcome);
                    Fact("last_seq", player.LastSeq);
                }
                finally
                {
                    await player.CloseAsync().ConfigureAwait(false);
                    player.Dispose();
                }
            }
        }
    }
}
