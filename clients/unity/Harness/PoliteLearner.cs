using System;
using Samvad.Client;

namespace Samvad.Harness
{
    /// <summary>The `polite` persona of clients/bots/personas.py, in C#: greets, asks the price, opens
    /// near 30 % of the first quote, comes up 7 % a turn, and shakes when the prices meet.</summary>
    sealed class PoliteLearner
    {
        const double Open = 0.30, Step = 0.07, Limit = 0.55;
        int _lines;
        int? _firstQuote;

        public string Next(ReplyEvent last)
        {
            if (!_firstQuote.HasValue && last != null && last.CounterPrice.HasValue)
            {
                _firstQuote = last.CounterPrice;
            }
            string line = Line(last);
            _lines++;
            return line;
        }

        string Line(ReplyEvent last)
        {
            if (_lines == 0) return "Namaste bhaiya! Aap kaise ho?";
            if (!_firstQuote.HasValue || last == null || !last.CounterPrice.HasValue)
            {
                return "Bhaiya, ye tamatar kitne ka hai?";
            }
            int counter = last.CounterPrice.Value;
            int planned = Share(Math.Min(Limit, Open + Step * Math.Max(0, _lines - 2)));
            if (counter <= Math.Max(planned, Share(0.5)) || _lines >= 12)
            {
                return "Theek hai bhaiya, pakka!";
            }
            string[] options =
            {
                "Bahut mehenga hai, bhaiya. {0} mein de do?",
                "Thoda kam karo na bhaiya, {0} rupaye?",
                "Bhaiya, aapke tamatar bahut fresh hain, par {0} mein de do, please.",
                "Do kilo le raha hoon bhaiya, {0} mein doge?",
            };
            return string.Format(options[_lines % options.Length], planned);
        }

        int Share(double fraction)
        {
            double value = _firstQuote.Value * fraction;
            // Python's round() rounds halves to even, and so does Math.Round by default.
            return value >= 50 ? 5 * (int)Math.Round(value / 5) : Math.Max(1, (int)Math.Round(value));
        }
    }
}
